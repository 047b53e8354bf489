/*
 * job.c - a job's memory: what it owns, and how long it lives.  jobs.c
 * takes a job out of the daemon when it is over; it is freed then, or when
 * the last store operation that holds it is done (db.c takes and gives back
 * the holds).  Apart from jobs.c so that the store's thread, which holds
 * jobs, does not depend on the file that hands it operations.
 */
#include "srv.h"

void srv_job_free(srv_job *job)
{
    srv_work_release(&job->work);
    ap_free(job->prog_schedule);
    ap_free(job->ckpt);
    uv_mutex_destroy(&job->pmu);
    ap_free(job);
}

void srv_job_release_hold(srv *s, srv_job *job)
{
    (void)s;
    if (--job->dbops == 0 && job->dead)
        srv_job_free(job);
}
