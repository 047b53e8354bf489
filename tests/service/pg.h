/*
 * pg.h - a PostgreSQL server of the tests' own (tests/service/pgcluster:
 * initdb in a temporary directory, a free loopback port, an unprivileged
 * user), and fresh databases on it.  Header-only, like svc.h.
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
    char dir[256];
    char url[256]; /* postgresql://autopart@127.0.0.1:PORT/autopart */
    char base[200]; /* the same without the database name */
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

/* Starts a cluster (password: NULL for trusted logins).  False when it
 * cannot (the message is printed). */
static inline bool pg_start(pg_cluster *c, const char *password)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/autopart-pg-XXXXXX");
    if (!mkdtemp(c->dir)) {
        perror("mkdtemp");
        return false;
    }
    char args[600];
    snprintf(args, sizeof args, "start %s %s", c->dir, password ? password : "");
    if (pg_tool(args, c->url, sizeof c->url) != 0 || strncmp(c->url, "postgresql://", 13) != 0) {
        fprintf(stderr, "pg.h: the test's PostgreSQL did not start (%s)\n", c->url);
        return false;
    }
    snprintf(c->base, sizeof c->base, "%.*s", (int)(strrchr(c->url, '/') - c->url), c->url);
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

/* The first column of the first row of a query (0 when none). */
static inline long long pg_int(const char *url, const char *sql)
{
    PGconn *conn = PQconnectdb(url);
    long long v = 0;
    if (PQstatus(conn) == CONNECTION_OK) {
        PGresult *r = PQexec(conn, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
            v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        else if (PQresultStatus(r) != PGRES_TUPLES_OK)
            fprintf(stderr, "pg.h: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    }
    PQfinish(conn);
    return v;
}

/* A new empty database on the cluster; its URL into url. */
static inline bool pg_new_db(pg_cluster *c, const char *name, char *url, size_t size)
{
    char sql[300];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    if (!pg_sql(c->url, sql))
        return false;
    snprintf(url, size, "%.200s/%.60s", c->base, name);
    return true;
}

static inline void pg_drop_db(pg_cluster *c, const char *name)
{
    char sql[200];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    pg_sql(c->url, sql);
}

#endif /* TEST_PG_H */
