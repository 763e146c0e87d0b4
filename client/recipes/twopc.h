/*
 * twopc — two-phase commit on liblarch (seed 000, "Two-phased Commit").
 *
 * Layout under a root R: the coordinator creates the transaction node R/<tx>
 * and one child R/<tx>/<site> per participating site, empty ("it leaves the
 * content undefined"), in one multi so no site ever sees half a transaction
 * (seed 004, multiop). Each site watches for its child (the transaction
 * reaching it) and votes by writing "commit" or "abort" into it. The
 * coordinator watches the votes and decides: abort as soon as a site votes
 * abort (seed 000: "a node can decide abort earlier"), abort when a site
 * that has not voted yet fails, abort when the vote timeout passes, commit
 * when every site voted commit. The decision is written into R/<tx>
 * ("commit" or "abort"; empty while undecided) exactly once, with setData at
 * version 0, and every site reads it from there, so all sites see the same
 * decision.
 *
 * Failure detection follows seed 000's second remedy: each site creates its
 * own ephemeral liveness node R/alive/<site> (twopc_site_open) and the
 * coordinator watches it; its disappearance (crash and session expiry, or
 * an orderly close) while the site's vote is missing means the site failed.
 * A site that already voted commit is prepared and stays counted. We use
 * the first remedy for message complexity too: only the coordinator
 * watches the votes; sites watch the decision.
 *
 * A vote is one multi {check R/<tx> at version 0, setData vote at version
 * 0}: it fails with ZK_EBADVERSION when the transaction is already decided
 * (the site should read the decision) or the site voted already.
 *
 * Connection loss (seed 004): reads and watches are retried once the handle
 * re-attached; a multi or setData whose reply was lost is retried and a
 * NODEEXISTS/BADVERSION that follows is checked against what we wrote.
 * ZK_ESESSIONEXPIRED is terminal and returned.
 *
 * Threading: a coordinator or site object is used by one thread at a time;
 * its watchers run on the handle's event thread and only signal a condition
 * variable. Free objects before closing their handle.
 */
#ifndef LARCH_RECIPES_TWOPC_H
#define LARCH_RECIPES_TWOPC_H

#include <stdint.h>

#include "client/larch.h"

#define TWOPC_SITES_MAX 64

enum twopc_decision { TWOPC_UNDECIDED = 0, TWOPC_COMMIT = 1, TWOPC_ABORT = 2 };
/* Why the coordinator decided as it did. */
enum twopc_reason {
    TWOPC_ALL_COMMITTED = 0, /* every site voted commit */
    TWOPC_VOTED_ABORT = 1,   /* some site voted abort */
    TWOPC_SITE_FAILED = 2,   /* a site's liveness node vanished before it voted */
    TWOPC_TIMED_OUT = 3,     /* the vote timeout passed */
};

/* ---- coordinator -------------------------------------------------------- */
struct twopc_coord;

/* Creates R/<tx> and its site children atomically (root created when
 * absent; its parent must exist). ZK_ENODEEXISTS when tx exists already.
 * sites: 1..TWOPC_SITES_MAX distinct names, each one path component. */
int twopc_coord_begin(struct larch *lh, const char *root, const char *tx,
                      const char *const *sites, int32_t nsites, int32_t timeout_ms,
                      struct twopc_coord **out);
/* Collects votes for up to vote_timeout_ms, decides, writes the decision and
 * returns it (with the reason; reason may be NULL). The decision is written
 * once: when one is there already, that one is returned. An error means
 * this call could not write its decision in time (one it sent may still
 * have applied, its reply lost); a later call may try again and returns the
 * decision written, if any. */
int twopc_coord_decide(struct twopc_coord *c, int32_t vote_timeout_ms,
                       enum twopc_decision *decision, enum twopc_reason *reason);
void twopc_coord_free(struct twopc_coord *c);

/* ---- site --------------------------------------------------------------- */
struct twopc_site;

/* Registers site `name` under root: creates its ephemeral liveness node
 * R/alive/<name>. ZK_ENODEEXISTS when another live session has that name. */
int twopc_site_open(struct larch *lh, const char *root, const char *name, int32_t timeout_ms,
                    struct twopc_site **out);
/* Frees the object; the liveness node goes with the session (close the
 * handle to leave). */
void twopc_site_free(struct twopc_site *s);
/* Waits for transaction tx to reach this site (its child exists), then votes
 * TWOPC_COMMIT or TWOPC_ABORT. */
int twopc_site_vote(struct twopc_site *s, const char *tx, enum twopc_decision vote,
                    int32_t timeout_ms);
/* Waits until tx exists and is decided, and returns the decision. */
int twopc_site_await(struct twopc_site *s, const char *tx, int32_t timeout_ms,
                     enum twopc_decision *decision);

#endif
