/* The C side of cosched-pmix: OpenPMIx's server module (callbacks the library calls on its
 * progress thread) turned into one flat event record handed to Rust, and the few server calls
 * Rust makes, taking plain C types. PMIx's own types (pmix_info_t, pmix_value_t, data arrays,
 * the macros that fill them) stay here, so the Rust side declares a handful of functions and
 * structs instead of the whole PMIx ABI.
 *
 * Every request that needs an answer later is a heap `csp_req_t` holding the library's
 * callback; Rust answers it exactly once through csp_reply_* (which frees it). */

#include <pmix.h>
#include <pmix_server.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Event kinds; keep in step with `sys::ffi` on the Rust side. */
enum {
    CSP_EV_CONNECTED = 1,
    CSP_EV_FINALIZED = 2,
    CSP_EV_ABORT = 3,
    CSP_EV_FENCE = 4,
    CSP_EV_DMODEX = 5,
    CSP_EV_PUBLISH = 6,
    CSP_EV_LOOKUP = 7,
    CSP_EV_UNPUBLISH = 8,
    CSP_EV_REFUSED = 9,
    CSP_EV_LOCAL_MODEX = 10,
};

/* What a refused request was. */
enum {
    CSP_REFUSED_SPAWN = 1,
    CSP_REFUSED_CONNECT = 2,
    CSP_REFUSED_DISCONNECT = 3,
    CSP_REFUSED_TOOL = 4,
    CSP_REFUSED_ALLOCATE = 5,
    CSP_REFUSED_VALUE_TYPE = 6,
};

/* Value types of the registration records built on the Rust side. */
enum {
    CSP_T_STRING = 1,
    CSP_T_U32 = 2,
    CSP_T_U16 = 3,
    CSP_T_RANK = 4,
    CSP_T_BOOL = 5,
    CSP_T_NODE_REGEX = 6,
    CSP_T_PROC_REGEX = 7,
    CSP_T_ARRAY = 8,
};

typedef struct {
    const char *nspace;
    uint32_t rank;
} csp_proc_t;

typedef struct csp_event {
    int kind;
    csp_proc_t proc;
    int status;
    const char *message;
    const csp_proc_t *procs;
    size_t nprocs;
    const char *data;
    size_t ndata;
    int flag;
    int range;
    const char *const *keys;
    const char *const *values;
    size_t nkeys;
    uint64_t tag;
    void *req;
} csp_event_t;

typedef struct csp_info {
    const char *key;
    int type;
    uint64_t num;
    const char *str;
    const struct csp_info *children;
    size_t nchildren;
} csp_info_t;

typedef void (*csp_sink_fn)(void *ctx, const csp_event_t *ev);

enum { REQ_MODEX = 1, REQ_OP = 2, REQ_LOOKUP = 3 };

typedef struct {
    int kind;
    pmix_modex_cbfunc_t modex;
    pmix_op_cbfunc_t op;
    pmix_lookup_cbfunc_t lookup;
    void *cbdata;
} csp_req_t;

static csp_sink_fn sink_fn;
static void *sink_ctx;

static void emit(csp_event_t *ev) {
    if (sink_fn != NULL) {
        sink_fn(sink_ctx, ev);
    }
}

static csp_event_t event(int kind, const pmix_proc_t *proc) {
    csp_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    if (proc != NULL) {
        ev.proc.nspace = proc->nspace;
        ev.proc.rank = proc->rank;
    }
    return ev;
}

static csp_req_t *request(int kind, void *cbdata) {
    csp_req_t *req = calloc(1, sizeof *req);
    if (req != NULL) {
        req->kind = kind;
        req->cbdata = cbdata;
    }
    return req;
}

/* The processes named by a PMIx call as csp_proc_t pointing into the library's array (valid
 * for the callback only); NULL with *n = 0 when there are none or memory ran out. */
static csp_proc_t *procs_of(const pmix_proc_t procs[], size_t nprocs, size_t *n) {
    *n = 0;
    if (procs == NULL || nprocs == 0) {
        return NULL;
    }
    csp_proc_t *out = calloc(nprocs, sizeof *out);
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < nprocs; i++) {
        out[i].nspace = procs[i].nspace;
        out[i].rank = procs[i].rank;
    }
    *n = nprocs;
    return out;
}

static void refuse(int what, const pmix_proc_t *proc) {
    csp_event_t ev = event(CSP_EV_REFUSED, proc);
    ev.status = what;
    emit(&ev);
}

/* ---- the server module ---- */

static pmix_status_t on_connected(const pmix_proc_t *proc, void *server_object, pmix_info_t info[],
                                  size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata) {
    (void)server_object, (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    csp_event_t ev = event(CSP_EV_CONNECTED, proc);
    emit(&ev);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t on_finalized(const pmix_proc_t *proc, void *server_object,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata) {
    (void)server_object, (void)cbfunc, (void)cbdata;
    csp_event_t ev = event(CSP_EV_FINALIZED, proc);
    emit(&ev);
    return PMIX_OPERATION_SUCCEEDED;
}

/* Acknowledged at once, so the rank's PMIx_Abort returns and the rank exits with its status;
 * ending the other ranks is the caller's part. The library only answers the rank through the
 * callback (a status returned here is not sent), hence cbfunc rather than
 * PMIX_OPERATION_SUCCEEDED. */
static pmix_status_t on_abort(const pmix_proc_t *proc, void *server_object, int status,
                              const char msg[], pmix_proc_t procs[], size_t nprocs,
                              pmix_op_cbfunc_t cbfunc, void *cbdata) {
    (void)server_object;
    csp_event_t ev = event(CSP_EV_ABORT, proc);
    ev.status = status;
    ev.message = msg;
    csp_proc_t *targets = procs_of(procs, nprocs, &ev.nprocs);
    ev.procs = targets;
    emit(&ev);
    free(targets);
    if (cbfunc != NULL) {
        cbfunc(PMIX_SUCCESS, cbdata);
    }
    return PMIX_SUCCESS;
}

static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                              size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc,
                              void *cbdata) {
    csp_req_t *req = request(REQ_MODEX, cbdata);
    if (req == NULL) {
        return PMIX_ERR_NOMEM;
    }
    req->modex = cbfunc;
    csp_event_t ev = event(CSP_EV_FENCE, NULL);
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_COLLECT_DATA)) {
            ev.flag = PMIX_INFO_TRUE(&info[i]);
        }
    }
    csp_proc_t *ps = procs_of(procs, nprocs, &ev.nprocs);
    ev.procs = ps;
    ev.data = data;
    ev.ndata = ndata;
    ev.req = req;
    emit(&ev);
    free(ps);
    return PMIX_SUCCESS;
}

static pmix_status_t on_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cbfunc, void *cbdata) {
    (void)info, (void)ninfo;
    csp_req_t *req = request(REQ_MODEX, cbdata);
    if (req == NULL) {
        return PMIX_ERR_NOMEM;
    }
    req->modex = cbfunc;
    csp_event_t ev = event(CSP_EV_DMODEX, proc);
    ev.req = req;
    emit(&ev);
    return PMIX_SUCCESS;
}

/* Keys of the library's own directives among a publish's or lookup's infos; every other key
 * is a name the rank publishes. */
static bool directive(const char *key) { return strncmp(key, "pmix.", 5) == 0; }

static int range_of(const pmix_info_t *info) {
    return info->value.type == PMIX_DATA_RANGE ? (int)info->value.data.range : -1;
}

static pmix_status_t on_publish(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata) {
    csp_event_t ev = event(CSP_EV_PUBLISH, proc);
    ev.range = -1;
    const char **keys = calloc(ninfo + 1, sizeof *keys);
    const char **values = calloc(ninfo + 1, sizeof *values);
    if (keys == NULL || values == NULL) {
        free(keys), free(values);
        return PMIX_ERR_NOMEM;
    }
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_RANGE)) {
            ev.range = range_of(&info[i]);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_PERSISTENCE) &&
                   info[i].value.type == PMIX_PERSIST) {
            ev.flag = info[i].value.data.persist;
        } else if (!directive(info[i].key)) {
            if (info[i].value.type != PMIX_STRING || info[i].value.data.string == NULL) {
                free(keys), free(values);
                refuse(CSP_REFUSED_VALUE_TYPE, proc);
                return PMIX_ERR_NOT_SUPPORTED;
            }
            keys[ev.nkeys] = info[i].key;
            values[ev.nkeys] = info[i].value.data.string;
            ev.nkeys++;
        }
    }
    csp_req_t *req = request(REQ_OP, cbdata);
    if (req == NULL) {
        free(keys), free(values);
        return PMIX_ERR_NOMEM;
    }
    req->op = cbfunc;
    ev.keys = keys;
    ev.values = values;
    ev.req = req;
    emit(&ev);
    free(keys), free(values);
    return PMIX_SUCCESS;
}

static void names_event(csp_event_t *ev, char **keys, const pmix_info_t info[], size_t ninfo) {
    ev->range = -1;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_RANGE)) {
            ev->range = range_of(&info[i]);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_WAIT)) {
            ev->flag = 1;
        }
    }
    size_t n = 0;
    while (keys != NULL && keys[n] != NULL) {
        n++;
    }
    ev->keys = (const char *const *)keys;
    ev->nkeys = n;
}

static pmix_status_t on_lookup(const pmix_proc_t *proc, char **keys, const pmix_info_t info[],
                               size_t ninfo, pmix_lookup_cbfunc_t cbfunc, void *cbdata) {
    csp_req_t *req = request(REQ_LOOKUP, cbdata);
    if (req == NULL) {
        return PMIX_ERR_NOMEM;
    }
    req->lookup = cbfunc;
    csp_event_t ev = event(CSP_EV_LOOKUP, proc);
    names_event(&ev, keys, info, ninfo);
    ev.req = req;
    emit(&ev);
    return PMIX_SUCCESS;
}

static pmix_status_t on_unpublish(const pmix_proc_t *proc, char **keys, const pmix_info_t info[],
                                  size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata) {
    csp_req_t *req = request(REQ_OP, cbdata);
    if (req == NULL) {
        return PMIX_ERR_NOMEM;
    }
    req->op = cbfunc;
    csp_event_t ev = event(CSP_EV_UNPUBLISH, proc);
    names_event(&ev, keys, info, ninfo);
    ev.req = req;
    emit(&ev);
    return PMIX_SUCCESS;
}

/* Refusals return an error status straight away: the library hands it to the rank, whose
 * call fails at once instead of waiting for an answer that would never come. */

static pmix_status_t on_spawn(const pmix_proc_t *proc, const pmix_info_t job_info[], size_t ninfo,
                              const pmix_app_t apps[], size_t napps, pmix_spawn_cbfunc_t cbfunc,
                              void *cbdata) {
    (void)job_info, (void)ninfo, (void)apps, (void)napps, (void)cbfunc, (void)cbdata;
    refuse(CSP_REFUSED_SPAWN, proc);
    return PMIX_ERR_NOT_SUPPORTED;
}

static pmix_status_t on_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata) {
    (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    /* A collective of every proc listed (this node's callers among them; the server does not
     * say which): each is reported, and the caller keeps those it serves. */
    for (size_t i = 0; i < nprocs; i++) refuse(CSP_REFUSED_CONNECT, &procs[i]);
    if (nprocs == 0) refuse(CSP_REFUSED_CONNECT, NULL);
    return PMIX_ERR_NOT_SUPPORTED;
}

static pmix_status_t on_disconnect(const pmix_proc_t procs[], size_t nprocs,
                                   const pmix_info_t info[], size_t ninfo,
                                   pmix_op_cbfunc_t cbfunc, void *cbdata) {
    (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    for (size_t i = 0; i < nprocs; i++) refuse(CSP_REFUSED_DISCONNECT, &procs[i]);
    if (nprocs == 0) refuse(CSP_REFUSED_DISCONNECT, NULL);
    return PMIX_ERR_NOT_SUPPORTED;
}

static void on_tool(pmix_info_t *info, size_t ninfo, pmix_tool_connection_cbfunc_t cbfunc,
                    void *cbdata) {
    (void)info, (void)ninfo;
    refuse(CSP_REFUSED_TOOL, NULL);
    if (cbfunc != NULL) {
        cbfunc(PMIX_ERR_NOT_SUPPORTED, NULL, cbdata);
    }
}

static pmix_status_t on_allocate(const pmix_proc_t *client, pmix_alloc_directive_t directive,
                                 const pmix_info_t data[], size_t ndata,
                                 pmix_info_cbfunc_t cbfunc, void *cbdata) {
    (void)directive, (void)data, (void)ndata, (void)cbfunc, (void)cbdata;
    refuse(CSP_REFUSED_ALLOCATE, client);
    return PMIX_ERR_NOT_SUPPORTED;
}

static pmix_server_module_t module = {
    .client_connected2 = on_connected,
    .client_finalized = on_finalized,
    .abort = on_abort,
    .fence_nb = on_fence,
    .direct_modex = on_dmodex,
    .publish = on_publish,
    .lookup = on_lookup,
    .unpublish = on_unpublish,
    .spawn = on_spawn,
    .connect = on_connect,
    .disconnect = on_disconnect,
    .tool_connected = on_tool,
    .allocate = on_allocate,
};

/* ---- answers ---- */

static void release_copy(void *data) { free(data); }

void csp_reply_modex(void *request, int status, const char *data, size_t ndata) {
    csp_req_t *req = request;
    char *copy = NULL;
    if (status == PMIX_SUCCESS && ndata > 0) {
        copy = malloc(ndata);
        if (copy == NULL) {
            status = PMIX_ERR_NOMEM;
            ndata = 0;
        } else {
            memcpy(copy, data, ndata);
        }
    } else {
        ndata = 0;
    }
    if (req->modex != NULL) {
        req->modex(status, copy, ndata, req->cbdata, release_copy, copy);
    } else {
        free(copy);
    }
    free(req);
}

void csp_reply_op(void *request, int status) {
    csp_req_t *req = request;
    if (req->op != NULL) {
        req->op(status, req->cbdata);
    }
    free(req);
}

/* The library packs the answer before returning (it does not keep the array). */
void csp_reply_lookup(void *request, int status, const csp_proc_t *owners, const char *const *keys,
                      const char *const *values, size_t n) {
    csp_req_t *req = request;
    pmix_pdata_t *pdata = NULL;
    if (status == PMIX_SUCCESS && n > 0) {
        PMIX_PDATA_CREATE(pdata, n);
        if (pdata == NULL) {
            status = PMIX_ERR_NOMEM;
            n = 0;
        }
        for (size_t i = 0; i < n && pdata != NULL; i++) {
            pmix_proc_t owner;
            PMIX_LOAD_PROCID(&owner, owners[i].nspace, owners[i].rank);
            PMIX_PDATA_LOAD(&pdata[i], &owner, keys[i], values[i], PMIX_STRING);
        }
    } else {
        n = 0;
    }
    if (req->lookup != NULL) {
        req->lookup(status, pdata, n, req->cbdata);
    }
    if (pdata != NULL) {
        PMIX_PDATA_FREE(pdata, n);
    }
    free(req);
}

/* ---- calls into the server ---- */

/* A blocking wait on one of the library's completion callbacks (never called on the progress
 * thread: the Rust side refuses that). */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    pmix_status_t status;
} waiter_t;

static void waiter_init(waiter_t *w) {
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = false;
    w->status = PMIX_SUCCESS;
}

static void waiter_done(pmix_status_t status, void *cbdata) {
    waiter_t *w = cbdata;
    pthread_mutex_lock(&w->lock);
    w->status = status;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* The status of a call made with waiter_done as its callback. */
static pmix_status_t waiter_wait(waiter_t *w, pmix_status_t rc) {
    if (rc == PMIX_SUCCESS) {
        pthread_mutex_lock(&w->lock);
        while (!w->done) {
            pthread_cond_wait(&w->cond, &w->lock);
        }
        rc = w->status;
        pthread_mutex_unlock(&w->lock);
    } else if (rc == PMIX_OPERATION_SUCCEEDED) {
        rc = PMIX_SUCCESS;
    }
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    return rc;
}

int csp_init(const char *tmpdir, const char *hostname, csp_sink_fn sink, void *ctx) {
    sink_fn = sink;
    sink_ctx = ctx;
    bool no = false;
    pmix_info_t info[5];
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[2], PMIX_SERVER_TOOL_SUPPORT, &no, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[3], PMIX_SERVER_SYSTEM_SUPPORT, &no, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[4], PMIX_HOSTNAME, hostname, PMIX_STRING);
    pmix_status_t rc = PMIx_server_init(&module, info, 5);
    for (size_t i = 0; i < 5; i++) {
        PMIX_INFO_DESTRUCT(&info[i]);
    }
    if (rc != PMIX_SUCCESS) {
        sink_fn = NULL;
        sink_ctx = NULL;
    }
    return rc;
}

int csp_finalize(void) {
    pmix_status_t rc = PMIx_server_finalize();
    sink_fn = NULL;
    sink_ctx = NULL;
    return rc;
}

static pmix_status_t load(pmix_info_t *dst, const csp_info_t *src) {
    switch (src->type) {
    case CSP_T_STRING:
        PMIX_INFO_LOAD(dst, src->key, src->str, PMIX_STRING);
        return PMIX_SUCCESS;
    case CSP_T_U32: {
        uint32_t v = (uint32_t)src->num;
        PMIX_INFO_LOAD(dst, src->key, &v, PMIX_UINT32);
        return PMIX_SUCCESS;
    }
    case CSP_T_U16: {
        uint16_t v = (uint16_t)src->num;
        PMIX_INFO_LOAD(dst, src->key, &v, PMIX_UINT16);
        return PMIX_SUCCESS;
    }
    case CSP_T_RANK: {
        pmix_rank_t v = (pmix_rank_t)src->num;
        PMIX_INFO_LOAD(dst, src->key, &v, PMIX_PROC_RANK);
        return PMIX_SUCCESS;
    }
    case CSP_T_BOOL: {
        bool v = src->num != 0;
        PMIX_INFO_LOAD(dst, src->key, &v, PMIX_BOOL);
        return PMIX_SUCCESS;
    }
    case CSP_T_NODE_REGEX:
    case CSP_T_PROC_REGEX: {
        char *regex = NULL;
        pmix_status_t rc = src->type == CSP_T_NODE_REGEX ? PMIx_generate_regex(src->str, &regex)
                                                         : PMIx_generate_ppn(src->str, &regex);
        if (rc != PMIX_SUCCESS) {
            return rc;
        }
        PMIX_INFO_LOAD(dst, src->key, regex, PMIX_REGEX);
        free(regex);
        return PMIX_SUCCESS;
    }
    case CSP_T_ARRAY: {
        pmix_data_array_t *array;
        PMIX_DATA_ARRAY_CREATE(array, src->nchildren, PMIX_INFO);
        if (array == NULL) {
            return PMIX_ERR_NOMEM;
        }
        pmix_info_t *items = array->array;
        pmix_status_t rc = PMIX_SUCCESS;
        for (size_t i = 0; i < src->nchildren && rc == PMIX_SUCCESS; i++) {
            rc = load(&items[i], &src->children[i]);
        }
        if (rc == PMIX_SUCCESS) {
            PMIX_INFO_LOAD(dst, src->key, array, PMIX_DATA_ARRAY);
        }
        PMIX_DATA_ARRAY_FREE(array);
        return rc;
    }
    default:
        return PMIX_ERR_BAD_PARAM;
    }
}

int csp_register_nspace(const char *nspace, uint32_t nlocal, const csp_info_t *infos, size_t n) {
    pmix_info_t *info = NULL;
    pmix_status_t rc = PMIX_SUCCESS;
    if (n > 0) {
        PMIX_INFO_CREATE(info, n);
        if (info == NULL) {
            return PMIX_ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < n && rc == PMIX_SUCCESS; i++) {
        rc = load(&info[i], &infos[i]);
    }
    if (rc == PMIX_SUCCESS) {
        waiter_t w;
        waiter_init(&w);
        rc = waiter_wait(&w, PMIx_server_register_nspace(nspace, (int)nlocal, info, n,
                                                         waiter_done, &w));
    }
    if (info != NULL) {
        PMIX_INFO_FREE(info, n);
    }
    return rc;
}

int csp_deregister_nspace(const char *nspace) {
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, nspace);
    waiter_t w;
    waiter_init(&w);
    PMIx_server_deregister_nspace(ns, waiter_done, &w);
    /* The call has no status of its own: the callback always comes. */
    return waiter_wait(&w, PMIX_SUCCESS);
}

int csp_register_client(const char *nspace, uint32_t rank, uint32_t uid, uint32_t gid) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    waiter_t w;
    waiter_init(&w);
    return waiter_wait(&w, PMIx_server_register_client(&proc, uid, gid, NULL, waiter_done, &w));
}

int csp_deregister_client(const char *nspace, uint32_t rank) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    waiter_t w;
    waiter_init(&w);
    PMIx_server_deregister_client(&proc, waiter_done, &w);
    return waiter_wait(&w, PMIX_SUCCESS);
}

/* The rank's PMIx variables as a NULL-terminated "NAME=value" array (free with csp_free_env). */
int csp_setup_fork(const char *nspace, uint32_t rank, char ***env) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    *env = NULL;
    return PMIx_server_setup_fork(&proc, env);
}

void csp_free_env(char **env) {
    if (env != NULL) {
        PMIX_ARGV_FREE(env);
    }
}

typedef struct {
    uint64_t tag;
    char nspace[PMIX_MAX_NSLEN + 1];
    uint32_t rank;
} local_modex_t;

static void local_modex_done(pmix_status_t status, char *data, size_t ndata, void *cbdata) {
    local_modex_t *lm = cbdata;
    csp_event_t ev = event(CSP_EV_LOCAL_MODEX, NULL);
    ev.proc.nspace = lm->nspace;
    ev.proc.rank = lm->rank;
    ev.status = status;
    ev.data = data;
    ev.ndata = ndata;
    ev.tag = lm->tag;
    emit(&ev);
    free(lm);
}

/* Asks the library for the data a local rank put (answered once the rank has committed it),
 * for a direct modex request from another node; the answer is a CSP_EV_LOCAL_MODEX event
 * carrying `tag`. */
int csp_local_modex(const char *nspace, uint32_t rank, uint64_t tag) {
    local_modex_t *lm = calloc(1, sizeof *lm);
    if (lm == NULL) {
        return PMIX_ERR_NOMEM;
    }
    lm->tag = tag;
    PMIX_LOAD_NSPACE(lm->nspace, nspace);
    lm->rank = rank;
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    pmix_status_t rc = PMIx_server_dmodex_request(&proc, local_modex_done, lm);
    if (rc != PMIX_SUCCESS) {
        free(lm);
    }
    return rc;
}

const char *csp_error_string(int status) { return PMIx_Error_string(status); }

const char *csp_version(void) { return PMIx_Get_version(); }
