func.func @mÿ() {}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:13: error: invalid UTF-8 byte 0xFF
