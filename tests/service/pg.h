/*
 * pg.h - a PostgreSQL server of the tests' own (tests/service/pgcluster:
 * initdb in a temporary directory, a free loopback port, an unprivileged
 * user, a database and a password of its own), and SQL on it.  Header-only,
 * like svc.h.
 */
#ifndef TEST_PG_H
#define TEST_PG_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

typedef struct pg_cluster {
    char dir[256]; /* the test's temporary directory: the cluster, its log, the daemons' logs */
    char url[256]; /* postgresql://autopart:PASSWORD@127.0.0.1:PORT/autopart_NAME */
    int port;
} pg_cluster;

/* Runs pgcluster with arguments; its stdout's first line into out. */
static inline int pg_tool(const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/tests/service/pgcluster %s", AP_SOURCE_DIR, args);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[512] = "";
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    int st = pclose(f);
    line[strcspn(line, "\n")] = '\0';
    if (out)
        snprintf(out, size, "%.*s", (int)size - 1, line);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Starts a cluster in a new temporary directory, on port (0: a free one),
 * with a database and a password of its own.  False when it cannot (the
 * message is printed). */
static inline bool pg_start(pg_cluster *c, int port)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/autopart-pg-XXXXXX");
    if (!mkdtemp(c->dir)) {
        perror("mkdtemp");
        c->dir[0] = '\0';
        return false;
    }
    char args[600], p[16] = "";
    if (port)
        snprintf(p, sizeof p, "%d", port);
    snprintf(args, sizeof args, "start %s %s", c->dir, p);
    const char *at;
    if (pg_tool(args, c->url, sizeof c->url) != 0 || strncmp(c->url, "postgresql://", 13) != 0 ||
        !(at = strrchr(c->url, ':'))) {
        fprintf(stderr, "pg.h: the test's PostgreSQL did not start (%s); its directory: %s\n", c->url, c->dir);
        return false;
    }
    c->port = atoi(at + 1);
    return true;
}

static inline int pg_control(pg_cluster *c, const char *what)
{
    char args[400];
    snprintf(args, sizeof args, "%s %s", what, c->dir);
    return pg_tool(args, NULL, 0);
}

static inline void pg_destroy(pg_cluster *c)
{
    if (c->dir[0])
        pg_control(c, "destroy");
    c->dir[0] = '\0';
}

/* At the end of a test: the server stops; its directory (the server's log,
 * the daemons' logs) is removed when the test passed, kept and named when
 * it failed. */
static inline void pg_finish(pg_cluster *c, bool passed)
{
    if (!c->dir[0])
        return;
    if (passed) {
        pg_destroy(c);
        return;
    }
    pg_control(c, "kill");
    fprintf(stderr, "pg.h: the test failed; its PostgreSQL's directory is kept: %s (the server's log: %s/log)\n",
            c->dir, c->dir);
    c->dir[0] = '\0';
}

static inline void pg_quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

/* Runs SQL on the database at url; false (and a message on stderr) when
 * it fails. */
static inline bool pg_sql(const char *url, const char *sql)
{
    PGconn *conn = PQconnectdb(url);
    PQsetNoticeProcessor(conn, pg_quiet, NULL);
    bool ok = PQstatus(conn) == CONNECTION_OK;
    if (ok) {
        PGresult *r = PQexec(conn, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok)
            fprintf(stderr, "pg.h: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    } else {
        fprintf(stderr, "pg.h: %s", PQerrorMessage(conn));
    }
    PQfinish(conn);
    return ok;
}

/* The first column of the first row of a query (0 when none; -1, and a
 * message on stderr, when it fails). */
static inline long long pg_int(const char *url, const char *sql)
{
    PGconn *conn = PQconnectdb(url);
    long long v = -1;
    if (PQstatus(conn) == CONNECTION_OK) {
        PGresult *r = PQexec(conn, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            v = PQntuples(r) > 0 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
        else
            fprintf(stderr, "pg.h: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    } else {
        fprintf(stderr, "pg.h: %s", PQerrorMessage(conn));
    }
    PQfinish(conn);
    return v;
}

#endif /* TEST_PG_H */
