/*
 * apply.c - a schedule of PartIR actions applied to a module, and the views
 * of the result that `autopart apply` prints and autopartd sends: partition
 * specs, per-tactic costs, the JSON report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"

static const char *const blocked_names[] = {"conflict", "axis already used", "indivisible",
                                            "atomic",   "dynamic dim",       "no TMR rule"};

/* Why propagation stopped: "conflict", "axis already used", ... */
static const char *blocked_kind_name(ir_block_kind k)
{
    return (unsigned)k < AP_ARRAY_LEN(blocked_names) ? blocked_names[k] : "?";
}

/* ================================================================ opening */

/* The mesh of an sdy.mesh op: `sdy.mesh @mesh = <["x"=2, "y"=4]>`. */
bool apply_module_mesh(const ir_module *m, ir_mesh *mesh)
{
    for (const ir_op *op = ir_module_body(m)->first; op; op = op->next) {
        if (strcmp(op->name, "sdy.mesh") || !op->tmpl)
            continue;
        ap_buf b;
        ap_buf_init(&b);
        for (uint32_t i = 0; i < op->tmpl->n; i++)
            if (op->tmpl->pieces[i].kind == IR_TP_TEXT)
                ap_buf_put(&b, op->tmpl->pieces[i].text, op->tmpl->pieces[i].len);
        const char *s = b.data ? strchr(b.data, '[') : NULL;
        char text[512] = "";
        size_t n = 0;
        for (; s && *s && *s != ']' && n + 2 < sizeof text; s++)
            if (*s != '"' && *s != '[' && *s != ' ')
                text[n++] = *s;
        text[n] = '\0';
        ap_buf_free(&b);
        ap_error err;
        if (n && ir_mesh_parse(text, mesh, &err) == 0)
            return true;
    }
    return false;
}

int apply_open_module(ir_module *m, const char *func_name, const ir_mesh *mesh, bool import, apply_state *st,
                      ap_error *err)
{
    int rc;
    memset(st, 0, sizeof *st);
    st->m = m;
    st->name = m->filename ? m->filename : "module";
    ir_op *f = func_name ? ir_module_func(m, func_name) : ir_module_entry(m);
    if (!f)
        return ap_error_set(err, AP_ENOTFOUND, "%s: no function %s%s to partition", st->name, func_name ? "@" : "",
                            func_name ? func_name : "@main (and no single public function)");
    if (mesh)
        st->mesh = *mesh;
    else if (!apply_module_mesh(m, &st->mesh))
        return ap_error_set(err, AP_EINVALID, "%s: no mesh given and the module declares no sdy.mesh", st->name);
    st->inlined_calls = ir_inline_count(m, f);
    if ((rc = ir_inline_calls(m, f, err)) < 0 || (rc = ir_pctx_new(m, f, &st->mesh, &st->ctx, err)) < 0 ||
        (rc = ir_partition_new(st->ctx, &st->p, err)) < 0)
        return rc;
    if (import) {
        if ((rc = ir_schedule_import_apply(st->p, m, f, err)) < 0)
            return rc;
    }
    return 0;
}

void apply_state_free(apply_state *st)
{
    ap_free(st->note);
    ap_free(st->tactics);
    ir_lowered_free(&st->lw);
    ir_partition_free(st->p);
    ir_pctx_free(st->ctx);
    ir_module_free(st->m);
    memset(st, 0, sizeof *st);
}

/* =============================================================== schedule */

/* Whether schedule text names a value %N (or %N#k): a '%' followed by a
 * digit outside a comment and a quoted name. */
static bool names_numbered_value(const char *s)
{
    bool quoted = false;
    for (; *s; s++) {
        if (*s == '"')
            quoted = !quoted;
        else if (!quoted && *s == '#' && (s[1] < '0' || s[1] > '9')) {
            while (s[1] && s[1] != '\n')
                s++;
        } else if (!quoted && *s == '%' && s[1] >= '0' && s[1] <= '9')
            return true;
    }
    return false;
}

char *apply_inline_note(const char *func, uint32_t calls, const char *schedule, bool func_given)
{
    if (!calls || !schedule || !names_numbered_value(schedule))
        return NULL;
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_printf(&b,
                  "@%s calls other functions (%u call%s), inlined before partitioning: %%N in the schedule counts the "
                  "values of the inlined @%s, as `autopart parse --inline%s%s` prints it, not as the module is written",
                  func, calls, calls == 1 ? "" : "s", func, func_given ? " --func " : "", func_given ? func : "");
    if (b.oom) {
        ap_buf_free(&b);
        return NULL;
    }
    return b.data;
}

int apply_note_schedule(apply_state *st, const char *schedule, bool func_given, ap_error *err)
{
    ap_free(st->note);
    st->note = NULL;
    if (!st->inlined_calls || !st->ctx || !schedule || !names_numbered_value(schedule))
        return 0;
    if (!(st->note = apply_inline_note(ir_func_name(ir_pctx_func(st->ctx)), st->inlined_calls, schedule, func_given)))
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    return 0;
}

void apply_adopt(apply_state *st, ir_module *m, ir_pctx *ctx, ir_partition *p)
{
    memset(st, 0, sizeof *st);
    st->m = m;
    st->ctx = ctx;
    st->p = p;
    st->mesh = *ir_pctx_mesh(ctx);
    st->name = m->filename ? m->filename : "module";
}

/* The tactic on one line, without the schedule's comments: newlines become
 * ';', runs of blanks and separators one. */
static void tactic_line(char *out, size_t size, const char *tactic, size_t len)
{
    size_t n = 0, cap = size - 1;
    bool cut = false;
    for (size_t i = 0; i < len && !cut; i++) {
        if (tactic[i] == '#') {
            while (i + 1 < len && tactic[i + 1] != '\n')
                i++;
            continue;
        }
        char c = tactic[i] == '\n' ? ';' : tactic[i];
        if ((c == ';' || c == ' ') && (n == 0 || out[n - 1] == ';' || out[n - 1] == ' '))
            continue;
        if (n == cap)
            cut = true;
        else
            out[n++] = c;
    }
    while (n && (out[n - 1] == ';' || out[n - 1] == ' '))
        n--;
    out[n] = '\0';
    if (cut && n > 3)
        memcpy(out + n - 3, "...", 3);
}

int apply_after_tactic(void *costing, ir_partition *p, const char *tactic, size_t len, ap_error *err)
{
    apply_costing *tc = costing;
    apply_state *st = tc->st;
    if (st->n_tactics == st->cap_tactics) {
        int cap = st->cap_tactics ? st->cap_tactics * 2 : 8;
        apply_tactic *r = ap_realloc(st->tactics, sizeof *r * (size_t)cap);
        if (!r)
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        st->tactics = r;
        st->cap_tactics = cap;
    }
    apply_tactic *row = &st->tactics[st->n_tactics++];
    memset(row, 0, sizeof *row);
    tactic_line(row->text, sizeof row->text, tactic, len);
    ir_lowered lw;
    int rc = cost_state_estimate(p, tc->dev, NULL, tc->opts, &lw, &row->cost, err);
    if (rc < 0)
        return rc;
    memcpy(row->count, lw.count, sizeof row->count);
    row->costed = true;
    ir_lowered_free(&lw);
    return 0;
}

int apply_schedule(apply_state *st, const char *schedule, const cost_device *dev, const cost_options *opts,
                   ap_error *err)
{
    if (!dev)
        return ir_schedule_apply(st->p, schedule, err);
    apply_costing tc = {st, dev, opts};
    return ir_schedule_apply_cb(st->p, schedule, apply_after_tactic, &tc, err);
}

int apply_lower(apply_state *st, const cost_device *dev, const cost_options *opts, ap_error *err)
{
    ir_lowered_free(&st->lw);
    st->lowered = st->costed = false;
    int rc = dev ? cost_state_estimate(st->p, dev, NULL, opts, &st->lw, &st->cost, err) : ir_lower(st->p, &st->lw, err);
    if (rc < 0)
        return rc;
    st->lowered = true;
    st->costed = dev != NULL;
    return 0;
}

void apply_take_lowered(apply_state *st, ir_pctx *ctx, ir_partition *p, ir_lowered *lw, const cost_report *cost)
{
    ir_partition_free(st->p);
    ir_lowered_free(&st->lw);
    if (ctx) {
        ir_pctx_free(st->ctx);
        st->ctx = ctx;
        st->mesh = *ir_pctx_mesh(ctx);
    }
    st->p = p;
    st->lw = *lw;
    memset(lw, 0, sizeof *lw);
    st->lowered = true;
    st->cost = *cost;
    st->costed = true;
}

char *apply_schedule_text(const apply_state *st)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_partition_schedule(st->p, &b);
    if (b.oom) {
        ap_buf_free(&b);
        return NULL;
    }
    return b.data ? ap_buf_take(&b, NULL) : ap_strdup("");
}

/* ============================================================== shardings */

static char *type_text(const ir_type *t)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_type_print(&b, t);
    return b.data && !b.oom ? ap_buf_take(&b, NULL) : (ap_buf_free(&b), ap_strdup("?"));
}

/* P('batch', None), P(('batch', 'model'),): the same text as ir_layout_pspec. */
static char *spec_text(const apply_sharding *s, const ir_mesh *mesh)
{
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "P(");
    for (int d = 0; d < s->rank; d++) {
        if (d)
            ap_buf_puts(&b, ", ");
        if (s->n_axes[d] == 0) {
            ap_buf_puts(&b, "None");
        } else if (s->n_axes[d] == 1) {
            ap_buf_printf(&b, "'%s'", mesh->names[s->axes[d][0]]);
        } else {
            ap_buf_putc(&b, '(');
            for (int k = 0; k < s->n_axes[d]; k++)
                ap_buf_printf(&b, k ? ", '%s'" : "'%s'", mesh->names[s->axes[d][k]]);
            ap_buf_putc(&b, ')');
        }
    }
    if (s->rank == 1)
        ap_buf_putc(&b, ',');
    ap_buf_putc(&b, ')');
    if (b.oom) {
        ap_buf_free(&b);
        return NULL;
    }
    return ap_buf_take(&b, NULL);
}

void apply_shardings_free(apply_sharding *s, int n)
{
    for (int i = 0; s && i < n; i++) {
        ap_free(s[i].name);
        ap_free(s[i].type);
        ap_free(s[i].spec);
    }
    ap_free(s);
}

int apply_shardings(const apply_state *st, apply_sharding **out, int *n_out, ap_error *err)
{
    const ir_mesh *mesh = &st->mesh;
    ir_op *f = ir_pctx_func(st->ctx);
    ir_op *lf = st->lowered && st->lw.module ? ir_module_entry(st->lw.module) : NULL;
    uint32_t na = ir_func_num_args(f), nr = lf ? ir_func_num_results(f) : 0;
    apply_sharding *s = ap_calloc((size_t)na + nr + 1, sizeof *s);
    int n = 0;
    *out = NULL;
    *n_out = 0;
    if (!s)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    for (uint32_t a = 0; a < na; a++, n++) {
        apply_sharding *sh = &s[n];
        const ir_value *v = ir_func_arg(f, a);
        ir_layout l;
        ir_partition_value_layout(st->p, v, &l);
        const char *name = ir_func_arg_name(f, a);
        char ref[32];
        snprintf(ref, sizeof ref, "%%arg%u", a);
        sh->index = a;
        sh->rank = v->type && v->type->kind == IR_T_TENSOR && v->type->rank > 0 ? v->type->rank : 0;
        for (int d = 0; d < sh->rank && d < IR_MAX_RANK; d++)
            sh->n_axes[d] = ir_layout_dim_axes(&l, d, sh->axes[d]);
        for (int x = 0; x < mesh->n_axes; x++)
            if (l.dim[x] == IR_AX_PARTIAL)
                sh->partial[sh->n_partial++] = x;
        sh->name = ap_strdup(name ? name : ref);
        sh->type = type_text(v->type);
        sh->spec = spec_text(sh, mesh);
        if (!sh->name || !sh->type || !sh->spec)
            goto oom;
    }
    /* results: as they leave the SPMD program (autopart.layout) */
    for (uint32_t r = 0; r < nr; r++, n++) {
        apply_sharding *sh = &s[n];
        ir_attr *info = ir_func_result_attr(f, r, "jax.result_info");
        ir_attr *lay = ir_func_result_attr(lf, r, "autopart.layout");
        const ir_type *t = ir_func_type(f)->elems[ir_func_type(f)->n_inputs + (int)r];
        char ref[32];
        snprintf(ref, sizeof ref, "result #%u", r);
        sh->result = true;
        sh->index = r;
        sh->rank = lay && lay->kind == IR_A_ARRAY ? lay->u.arr.n : 0;
        if (sh->rank > IR_MAX_RANK)
            sh->rank = IR_MAX_RANK;
        for (int d = 0; d < sh->rank; d++) {
            ir_attr *axes = lay->u.arr.items[d];
            for (int k = 0; axes->kind == IR_A_ARRAY && k < axes->u.arr.n && sh->n_axes[d] < IR_MAX_AXES; k++) {
                const ir_attr *ax = axes->u.arr.items[k];
                int x = ax->kind == IR_A_STRING ? ir_mesh_axis(mesh, ax->u.str.s, ax->u.str.len) : -1;
                if (x >= 0)
                    sh->axes[d][sh->n_axes[d]++] = x;
            }
        }
        sh->name = ap_strdup(info && info->kind == IR_A_STRING && info->u.str.s[0] ? info->u.str.s : ref);
        sh->type = type_text(t);
        sh->spec = spec_text(sh, mesh);
        if (!sh->name || !sh->type || !sh->spec)
            goto oom;
    }
    *out = s;
    *n_out = n;
    return 0;
oom:
    apply_shardings_free(s, n + 1);
    return ap_error_set(err, AP_ENOMEM, "out of memory");
}

json_t *apply_shardings_json(const apply_state *st)
{
    apply_sharding *s;
    int n;
    if (apply_shardings(st, &s, &n, NULL) < 0)
        return NULL;
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(s[i].result ? "result" : "argument"));
        json_object_set_new(o, "index", json_integer(s[i].index));
        json_object_set_new(o, "name", json_string(s[i].name));
        json_object_set_new(o, "type", json_string(s[i].type));
        json_object_set_new(o, "spec", json_string(s[i].spec));
        json_array_append_new(arr, o);
    }
    apply_shardings_free(s, n);
    return arr;
}

/* ================================================================= report */

json_t *apply_report_json(const apply_state *st)
{
    const ir_mesh *mesh = &st->mesh;
    const ir_lowered *lw = &st->lw;
    json_t *root = json_object(), *coll = json_object(), *bytes = json_object(), *conf = json_array();
    ap_buf mb;
    ap_buf_init(&mb);
    ir_mesh_format(mesh, &mb);
    json_object_set_new(root, "mesh", json_string(mb.data ? mb.data : ""));
    ap_buf_free(&mb);
    for (int k = 0; k < IR_COLL__COUNT; k++) {
        json_object_set_new(coll, ir_coll_name((ir_coll_kind)k), json_integer((json_int_t)lw->count[k]));
        json_object_set_new(bytes, ir_coll_name((ir_coll_kind)k), json_integer((json_int_t)lw->bytes[k]));
    }
    json_object_set_new(root, "collectives", coll);
    json_object_set_new(root, "collective_bytes", bytes);
    json_object_set_new(root, "dynslices", json_integer((json_int_t)lw->n_dynslice));
    json_object_set_new(root, "shardings", apply_shardings_json(st));
    uint32_t nb;
    const ir_blocked *bl = ir_partition_blocked(st->p, &nb);
    for (uint32_t i = 0; i < nb; i++) {
        ir_op *op = ir_pctx_op(st->ctx, bl[i].op);
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(blocked_kind_name(bl[i].kind)));
        json_object_set_new(o, "axis", json_string(mesh->names[bl[i].axis]));
        json_object_set_new(o, "op", json_string(op ? op->name : "(tiling of a value)"));
        if (op && op->src_line) {
            json_object_set_new(o, "line", json_integer(op->src_line));
            json_object_set_new(o, "column", json_integer(op->src_col));
        }
        json_object_set_new(o, "why", json_string(bl[i].why));
        json_array_append_new(conf, o);
    }
    json_object_set_new(root, "conflicts", conf);
    if (st->costed) {
        json_t *cj = cost_report_to_json(&st->cost);
        json_t *inner = cj ? json_object_get(cj, "cost") : NULL;
        if (inner)
            json_object_set(root, "cost", inner);
        json_decref(cj);
    }
    if (st->n_tactics) {
        json_t *tac = json_array();
        for (int i = 0; i < st->n_tactics; i++) {
            const apply_tactic *r = &st->tactics[i];
            json_t *o = json_object(), *cc = json_object();
            json_object_set_new(o, "tactic", json_string(r->text));
            for (int k = 0; k < IR_COLL__COUNT; k++)
                json_object_set_new(cc, ir_coll_name((ir_coll_kind)k), json_integer((json_int_t)r->count[k]));
            json_object_set_new(o, "collectives", cc);
            if (r->costed) {
                json_object_set_new(o, "runtime_s", json_real(r->cost.runtime_s));
                json_object_set_new(o, "peak_memory_bytes", json_integer(r->cost.peak_memory_bytes));
                json_object_set_new(o, "fits", json_boolean(r->cost.fits));
            }
            json_array_append_new(tac, o);
        }
        json_object_set_new(root, "tactics", tac);
    }
    char *sched = apply_schedule_text(st);
    json_object_set_new(root, "schedule", json_string(sched ? sched : ""));
    ap_free(sched);
    if (st->note) {
        json_t *notes = json_array();
        json_array_append_new(notes, json_string(st->note));
        json_object_set_new(root, "notes", notes);
    }
    return root;
}
