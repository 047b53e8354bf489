/*
 * fuzz_hlo.c - libFuzzer target for the XLA HLO text parser: see
 * fuzz_roundtrip.h for what every input must satisfy.
 */
#include "fuzz_roundtrip.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    return fuzz_roundtrip(IR_FMT_HLO, data, size, "fuzz.hlo");
}
