#!/bin/sh
# configure-containerd.sh: init container `configure-containerd` of the gvisorgen runsc-installer DaemonSet.
#
# Adds the runsc runtime to the host containerd's config, safely:
#  1. takes the lock in STATE_DIR; refuses a config that containerd already rejects (unless only gvisorgen's own
#     block is at fault), a config version above 4, damaged block markers, and a symlinked config; refuses, before
#     anything is written and with zero restarts, when the running containerd does not serve CRI (down, CRI disabled,
#     CRI failed to load), naming the cause and the fix;
#  2. a missing config starts from the host's own `containerd config default` (never a file holding only runsc);
#  3. a runsc table that exists outside gvisorgen's block (by hand, any TOML spelling, or in an `imports` drop-in),
#     as seen in the host containerd's `config dump`, is respected and nothing is added;
#  4. otherwise, where the config's own text imports a folder under its folder that would load gvisorgen-runsc.toml
#     and the node's containerd is 2.x (it merges imported tables; 1.x replaces them) and CONTAINERD_CONFIG_MODE is
#     not block, writes that drop-in (the handler under the config's own table name, no version line) and leaves the
#     config as it is (but for removing gvisorgen's block of an earlier run); the drop-in is validated together with
#     the config (the merged dump differs from the one without it only in the handler's tables) and, after the
#     restart, taken back when the running containerd's CRI does not list runsc; CONTAINERD_CONFIG_MODE=dropin refuses
#     a node where no drop-in is possible. Else writes one managed block between marker comments, with the runtime table that matches the file's
#     `version` (none/1: plugins.cri; 2: io.containerd.grpc.v1.cri; 3, 4: io.containerd.cri.v1.runtime), plus
#     RUNSC_CONFIG (runsc.toml, ConfigPath); when the file defines no runtimes and adding one would drop the default
#     runtime (containerd 1.x replaces its default map; a version 2 file is read by 1.x and 2.x alike), the block
#     also carries a minimal entry for it (runtime_type only);
#  5. validates the candidate with the host's containerd before the swap: `config dump` exits 0, shows
#     runtimes.runsc under the effective CRI plugin and still runtimes.<default_runtime_name>, and containerd ignores
#     no key that the old config did not already have ignored;
#  6. swaps it in by compare-and-swap: the rename happens only if the config still holds the bytes read and validated
#     (another writer's edit meanwhile: start over from the read, up to 3 attempts, then refuse); the backup CONTAINERD_CONFIG.gvisorgen-backup
#     is that snapshot (before the first change, never overwritten); restarts containerd only when the
#     file changed (or was changed by an earlier run that never saw containerd come back), waits for CRI (bounded),
#     and on failure restores the old config, restarts again and exits non-zero;
#  7. checks that containerd serves CRI, then records the verified config's digest, its socket and runsc.toml's digest
#     in CONTAINERD_CONFIG.gvisorgen-applied (read by ready.sh, which only reads files).
# A second run with the same inputs leaves every file byte-identical and does not restart containerd.
# Sandbox classes (RUNSC_CLASSES, classes.sh): each further class is one more handler runsc-<suffix> in the same block
# or drop-in, with its own runsc.toml beside RUNSC_CONFIG; every step above holds for all handlers at once (one
# validation, one restart, each judged and listed by CRI), and a class's handler that gvisorgen did not write is refused.
#
# Environment (set by the generator; see README.md): HOST_ROOT HOST_EXEC GVISOR_MODE INSTALL_DIR INSTALL_DIR_ON_PATH
#   CONTAINERD_CONFIG CONTAINERD_CONFIG_MODE CONTAINERD_SERVICE HOST_PATH RUNSC_CONFIG RUNSC_CONFIG_TOML RUNSC_CLASSES STATE_DIR RESTART_TIMEOUT_SECONDS LOCK_TIMEOUT_SECONDS
# Host commands used through HOST_EXEC: containerd (config dump / config default), systemctl restart containerd, ctr,
# crictl (when the host has it: does CRI list the runsc handler).
set -eu
GVZ_NAME=configure-containerd
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/lib.sh"
# shellcheck source-path=SCRIPTDIR source=classes.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/classes.sh"

# shellcheck disable=SC2086 # list of applet names
gvz_need_applets $GVZ_BASE_APPLETS
gvz_load_env
gvz_cas_args "$@"
[ "$GVISOR_MODE" = install ] || gvz_die "GVISOR_MODE is '$GVISOR_MODE': configure-containerd runs only in install mode"
# runsc.toml names the release's folder: the tag must be one (install-runsc, which runs first, checked it too).
gvz_check_version

CFG=$HOST_ROOT$CONTAINERD_CONFIG
CHECK=$HOST_ROOT$GVZ_CHECK
RCFG=$HOST_ROOT$RUNSC_CONFIG
[ -d "$HOST_ROOT$GVZ_CFG_DIR" ] || gvz_die "containerd config dir $GVZ_CFG_DIR is not mounted at $HOST_ROOT$GVZ_CFG_DIR"
# RUNSC_CONFIG's folder is containerd's config folder or a subfolder of it (created below when missing).
[ -d "${RCFG%/*}" ] || [ "${RUNSC_CONFIG%/*/*}" = "$GVZ_CFG_DIR" ] ||
    gvz_die "the dir of RUNSC_CONFIG ($RUNSC_CONFIG) is not mounted at ${RCFG%/*}"
[ ! -L "$CFG" ] || gvz_die "$CONTAINERD_CONFIG is a symlink; refusing to replace it (point CONTAINERD_CONFIG at the real file)"
gvz_check_runsc_toml
gvz_check_classes
gvz_check_gate_lines
# The handlers gvisorgen writes (all but an adopted runsc: below), and their list for messages.
OURS=runsc${GVZ_CLASSES:+ $GVZ_CLASSES}
HANDLERS=$(printf '%s' "$OURS" | sed 's/ /, /g')
HDESC="the runsc handler"
if [ -n "$GVZ_CLASSES" ]; then HDESC="the handlers $HANDLERS"; fi

gvz_check_host
gvz_setup_traps
gvz_lock
GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $CHECK $HOST_ROOT$GVZ_DROPIN_STAGED"
T=$GVZ_TMP

# --- the current config ---------------------------------------------------------------------------------------------
if [ -f "$CFG" ]; then
    existed=1
    cp "$CFG" "$T/current"
    mode=$(stat -c %a "$CFG")
else
    existed=
    mode=644
    gvz_log "no $CONTAINERD_CONFIG on the host: starting from the host containerd's own 'containerd config default'"
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    timeout 60 $GVZ_HX containerd config default >"$T/current" 2>"$T/default.err" ||
        gvz_die "'containerd config default' failed on the host: $(head -c 300 "$T/default.err")"
    [ -s "$T/current" ] || gvz_die "'containerd config default' printed nothing on the host"
fi

# shellcheck disable=SC2046 # two numbers
set -- $(gvz_block_count "$T/current")
has_block=
case "$1 $2" in
"0 0") ;;
"1 1")
    has_block=1
    [ "$(grep -nxF "$GVZ_BEGIN" "$T/current" | cut -d: -f1)" -lt "$(grep -nxF "$GVZ_END" "$T/current" | cut -d: -f1)" ] ||
        gvz_die "gvisorgen's block markers in $CONTAINERD_CONFIG are out of order; fix the file by hand"
    ;;
*) gvz_die "gvisorgen's block markers in $CONTAINERD_CONFIG are damaged ($1 begin, $2 end lines); fix the file by hand" ;;
esac

# The version decides the table name; refuse what this installer does not know before asking containerd anything.
gvz_strip_block "$T/current" >"$T/base"
fver=$(gvz_file_version "$T/base")
gvz_is_uint "$fver" || gvz_die "$CONTAINERD_CONFIG has a version line that is not a number: '$fver'"
[ "$fver" -le 4 ] || gvz_die "$CONTAINERD_CONFIG is config version $fver; this installer knows versions up to 4 and refuses to edit newer ones"
[ "$fver" -ge 1 ] || fver=1

first_error() { grep -iE 'level=(error|fatal)|failed|error' "$1" | head -n 1 | cut -c1-400; }

# Before anything is written: the running containerd must serve CRI (asked on the socket of the config on disk). A
# containerd without CRI (disabled, or failing to load) cannot be fixed by a restart: refuse, zero restarts.
cur_state=missing
if [ -n "$existed" ]; then
    cur_state=rejected
    if gvz_dump "$CONTAINERD_CONFIG" "$T/cur.dump" "$T/cur.err"; then cur_state=ok; fi
fi
# cur_dumped: the dump above is of exactly the bytes copied to $T/current (the file did not change meanwhile), so a
# candidate byte for byte the same needs no dump of its own (validate).
cur_dumped=
if [ "$cur_state" = ok ] && cmp -s "$CFG" "$T/current"; then cur_dumped=1; fi
live_addr=/run/containerd/containerd.sock
if [ "$cur_state" = ok ]; then
    gvz_fact "$T/cur.dump" addr
    live_addr=$GVZ_FACT
fi
gvz_require_cri "$live_addr" "$cur_state" "$T/cur.err" "$T/cur.dump"

if [ "$cur_state" = rejected ]; then
    if [ -z "$has_block" ]; then
        gvz_die "the host's containerd already rejects $CONTAINERD_CONFIG ($(first_error "$T/cur.err")); the config on disk is already broken (the running containerd still serves CRI from an earlier config): not touching it, fix it first"
    fi
    gvz_log "the host's containerd rejects $CONTAINERD_CONFIG with gvisorgen's block in it; rebuilding the block"
fi

# --- the config without gvisorgen's block (the base) -----------------------------------------------------------------
# The config's own imports patterns (its text: containerd 2.2+ dumps a built-in conf.d pattern that no file may import)
# and gvisorgen's drop-in, where the config imports a folder for one. A config that imports itself or such a folder is
# validated with the patterns' files spelled out (gvz_to_check): without the live config (block and all) and without
# gvisorgen's drop-in as it is on disk, so that the base is the node without anything of gvisorgen's.
gvz_imports "$T/base" >"$T/imports.list"
GVZ_DROPIN=$(gvz_dropin_path "$T/base")
DIN=
if [ -n "$GVZ_DROPIN" ]; then
    DIN=$HOST_ROOT$GVZ_DROPIN
    [ ! -L "$DIN" ] || gvz_die "$GVZ_DROPIN is a symlink; refusing to write through it. Nothing was changed and containerd was not restarted. Fix: remove the link, the installer retries by itself"
    if [ -e "$DIN" ] && ! gvz_is_managed "$DIN"; then
        gvz_die "$GVZ_DROPIN, where gvisorgen writes its drop-in, is there and gvisorgen did not write it (its first line is not '$GVZ_MANAGED'); not overwriting it. Nothing was changed and containerd was not restarted. Fix: move that file away (or rename it), the installer retries by itself"
    fi
fi
GVZ_SELF_IMPORT=
if gvz_self_importing "$T/base"; then GVZ_SELF_IMPORT=1; fi
gvz_to_check "$T/base" "$T/imports.list"
gvz_dump "$GVZ_CHECK" "$T/base.dump" "$T/base.err" ||
    gvz_die "the host's containerd rejects $CONTAINERD_CONFIG without gvisorgen's block ($(first_error "$T/base.err")); not touching it"
# imports: gvisorgen's own files out of every pattern's reach.
gvz_check_imports "$T/base" "$T/base.dump"
if [ -z "$GVZ_SELF_IMPORT" ] && gvz_self_importing "$T/base" "$T/base.dump"; then
    # imported through a file it imports
    GVZ_SELF_IMPORT=1
    gvz_imports "$T/base" "$T/base.dump" >"$T/imports.list"
    gvz_to_check "$T/base" "$T/imports.list"
    gvz_dump "$GVZ_CHECK" "$T/base.dump" "$T/base.err" ||
        gvz_die "the host's containerd rejects $CONTAINERD_CONFIG without gvisorgen's block ($(first_error "$T/base.err")); not touching it"
fi
gvz_unknown_keys "$T/base.err" >"$T/base.uk"

fprefix=$(gvz_runtimes_prefix "$fver")
gvz_fact "$T/base.dump" prefix
dprefix=$GVZ_FACT
gvz_fact "$T/base.dump" default
defname=${GVZ_FACT:-runc}
# containerd 1.x dumps version 2, 2.x dumps 3 or more
host_major=1
gvz_fact "$T/base.dump" version
if [ "$GVZ_FACT" -ge 3 ] 2>/dev/null; then host_major=2; fi
base_has_def=
if gvz_dump_defines "$T/base.dump" "$defname"; then base_has_def=1; fi

# --- where the runtime goes: gvisorgen's drop-in, or its block in place ---------------------------------------------
# A drop-in where the config imports a folder for one and containerd merges imported files table by table (2.x): one
# file of gvisorgen's, the config left as it is. containerd 1.x replaces a plugin's whole table with an imported file's
# (the config's CRI settings would vanish), and a version 1 file's CRI table has no name a drop-in could share: the
# block in place there, and wherever nothing is imported.
where=block
if [ "$CONTAINERD_CONFIG_MODE" = block ]; then
    why="CONTAINERD_CONFIG_MODE is block"
elif [ -z "$GVZ_DROPIN" ]; then
    why="$CONTAINERD_CONFIG imports no folder under $GVZ_CFG_DIR that would load a drop-in named $GVZ_DROPIN_NAME"
elif [ "$host_major" -lt 2 ]; then
    why="containerd 1.x replaces a plugin's whole table with an imported file's, so a drop-in would drop the CRI settings of $CONTAINERD_CONFIG"
elif [ "$fver" -lt 2 ]; then
    why="$CONTAINERD_CONFIG has no version line (version 1), whose CRI table no drop-in can share"
else
    where=dropin
fi
if [ "$where" = dropin ]; then
    also=
    if [ -n "$has_block" ]; then also=" (but for the block an earlier run of gvisorgen wrote there, which goes)"; fi
    gvz_log "drop-in: $CONTAINERD_CONFIG imports $GVZ_DROPIN and this containerd merges imported tables; the runtime goes there and $CONTAINERD_CONFIG stays as it is$also"
elif [ "$CONTAINERD_CONFIG_MODE" = dropin ]; then
    tmpl=
    for f in config.toml.tmpl config-v3.toml.tmpl; do
        [ ! -f "$HOST_ROOT$GVZ_CFG_DIR/$f" ] || tmpl="$tmpl $GVZ_CFG_DIR/$f"
    done
    if [ -n "$tmpl" ]; then tmpl=" It is rendered from the template the admin wrote ($(echo "$tmpl" | sed 's/^ //')), which gvisorgen never edits."; fi
    gvz_die "no drop-in is possible on this node: $why; and CONTAINERD_CONFIG_MODE is dropin (gvisor.host.containerdConfigMode: the node's distribution writes $CONTAINERD_CONFIG anew at every start, so an edit in place would be lost).$tmpl Nothing was changed and containerd was not restarted. Fix: use a release whose template imports a drop-in folder (k3s and RKE2 from about March 2026 import config-v3.toml.d/*.toml), or add imports = [\"$GVZ_CFG_DIR/config-v3.toml.d/*.toml\"] to the template, restart the service, and let the installer retry"
else
    gvz_log "in place: $why; the runtime goes into gvisorgen's block in $CONTAINERD_CONFIG"
fi

# validate FILE [DROPIN] : the candidate checks (FILE as the config, DROPIN as gvisorgen's drop-in, staged out of every
# pattern's reach and loaded where GVZ_DROPIN will be); sets WHY and MISSING_DEFAULT on failure, leaves the dump in
# $T/cand.dump.
validate() {
    WHY=
    MISSING_DEFAULT=
    _reuse=
    if [ $# -gt 1 ]; then
        cp "$2" "$HOST_ROOT$GVZ_DROPIN_STAGED"
        gvz_to_check "$1" "$T/imports.list" "$GVZ_DROPIN_STAGED"
    elif [ -n "$cur_dumped" ] && gvz_check_is_copy && cmp -s "$1" "$T/current"; then
        # The steady state (every later run of the installer): the candidate is the config on disk, which gvz_to_check
        # would copy as it is to a path in the same folder, and containerd accepted it above. Its dump is that one: one
        # containerd process fewer, the same checks below.
        cp "$T/cur.dump" "$T/cand.dump"
        cp "$T/cur.dump.facts" "$T/cand.dump.facts"
        cp "$T/cur.err" "$T/cand.err"
        _reuse=1
    else
        gvz_to_check "$1" "$T/imports.list"
    fi
    if [ -z "$_reuse" ] && ! gvz_dump "$GVZ_CHECK" "$T/cand.dump" "$T/cand.err"; then
        WHY="containerd config dump rejects it: $(first_error "$T/cand.err")"
        return 1
    fi
    gvz_fact "$T/cand.dump" prefix
    _p=$GVZ_FACT
    for _h in runsc $GVZ_CLASSES; do
        if ! gvz_dump_defines "$T/cand.dump" "$_h"; then
            WHY="containerd ignores the $_h table: the dump has no $_p.runtimes.$_h"
            return 1
        fi
    done
    gvz_fact "$T/cand.dump" default
    _d=${GVZ_FACT:-runc}
    if ! gvz_dump_defines "$T/cand.dump" "$_d"; then
        WHY="the default runtime '$_d' would vanish: the dump has no $_p.runtimes.$_d"
        MISSING_DEFAULT=1
        return 1
    fi
    gvz_unknown_keys "$T/cand.err" >"$T/cand.uk"
    awk -v f="$T/base.uk" 'BEGIN { while ((getline l < f) > 0) seen[l] = 1 } !seen[$0]' "$T/cand.uk" >"$T/new.uk"
    if [ -s "$T/new.uk" ]; then
        WHY="containerd ignores keys of it: $(head -n 3 "$T/new.uk" | tr '\n' ' ')"
        return 1
    fi
    if [ $# -gt 1 ]; then
        # The drop-in adds gvisorgen's handlers and changes nothing else: containerd 2.2 merges files of another
        # config version than the config's without migrating the config's CRI settings (they vanish silently).
        cp "$T/base.dump" "$T/base.sans"
        cp "$T/cand.dump" "$T/cand.sans"
        for _h in $OURS; do
            gvz_dump_sans "$T/base.sans" "$_p.runtimes.$_h" >"$T/sans.tmp" && mv "$T/sans.tmp" "$T/base.sans"
            gvz_dump_sans "$T/cand.sans" "$_p.runtimes.$_h" >"$T/sans.tmp" && mv "$T/sans.tmp" "$T/cand.sans"
        done
        if ! cmp -s "$T/base.sans" "$T/cand.sans"; then
            WHY="with the drop-in, containerd would change more than the handlers $HANDLERS: $(awk 'NR == FNR { a[FNR] = $0; n = FNR; next } $0 != a[FNR] { print "line " FNR ": " a[FNR] " -> " $0; d = 1; exit } END { if (!d && FNR != n) print "the dump is " (FNR > n ? "longer" : "shorter") }' "$T/base.sans" "$T/cand.sans" | cut -c1-300)"
            return 1
        fi
    fi
    return 0
}

# default_entry : a minimal entry for the default runtime in the file's runtimes table: its runtime_type only (from the
# base dump; io.containerd.runc.v2 when it shows none), keys every containerd that reads the file's version knows.
# containerd 1.x replaces its built-in runtimes with the file's runtimes table, 2.x merges: a version 2 file read by
# 1.x loses runc once the block adds a runtimes table, so the block carries this entry when the file lacks one.
default_entry() {
    _rt=$(gvz_dump_key "$T/base.dump" "$dprefix.runtimes.$defname" runtime_type)
    printf '[%s.%s]\n  runtime_type = "%s"\n' "$fprefix" "$defname" "${_rt:-io.containerd.runc.v2}"
}

# render_handler : gvisorgen's handlers' tables under the file's runtimes table (the block's and the drop-in's).
render_handler() {
    for _h in $OURS; do render_one "$_h"; done
}

# render_one HANDLER : one handler's tables; its options name its own runsc.toml.
render_one() {
    printf '[%s.%s]\n' "$fprefix" "$1"
    if [ "$INSTALL_DIR_ON_PATH" = false ] && { [ "$host_major" -lt 2 ] || [ "$fver" -le 2 ]; }; then
        # containerd 1.6 accepts runtime_path but does not use it to start a sandbox's shim ("binary not installed");
        # an absolute runtime_type is what its shim manager resolves. A version 1 or 2 file gets it on 2.x too, as 1.x
        # reads that file as well; 2.x resolves an absolute runtime_type the same way (and runtime_path names the
        # same binary), so the block is the same whichever version writes it.
        printf '  runtime_type = "%s/containerd-shim-runsc-v1"\n' "$INSTALL_DIR"
    else
        printf '  runtime_type = "io.containerd.runsc.v1"\n'
    fi
    if [ "$INSTALL_DIR_ON_PATH" = false ]; then
        printf '  runtime_path = "%s/containerd-shim-runsc-v1"\n' "$INSTALL_DIR"
    fi
    printf '[%s.%s.options]\n' "$fprefix" "$1"
    printf '  TypeUrl = "io.containerd.runsc.v1.options"\n'
    printf '  ConfigPath = "%s"\n' "$(gvz_class_config "$1")"
}

# render_dropin : gvisorgen's drop-in. No version line and the table name of the config's own version: containerd 2.2
# loses the config's CRI settings (or the handler) when the two differ, 2.3.0 to 2.3.4 refuse to start.
render_dropin() {
    printf '%s: the runsc runtime handler, a drop-in that %s imports. Overwritten on every run, removed on uninstall.\n' "$GVZ_MANAGED" "$CONTAINERD_CONFIG"
    render_handler
}

# render_block [COPYFILE]
render_block() {
    printf '%s\n' "$GVZ_BEGIN"
    render_handler
    if [ $# -gt 0 ]; then
        printf '# containerd 1.x drops its built-in runtimes once a runtimes table exists: a minimal default one\n'
        cat "$1"
    fi
    if gvz_ends_without_eol "$T/base"; then printf '%s\n' "$GVZ_NO_EOL"; fi
    printf '%s\n' "$GVZ_END"
}

# make_candidate [COPYFILE] : the base as it is (plus the newline it may lack), a blank line, the block.
make_candidate() {
    {
        cat "$T/base"
        if gvz_ends_without_eol "$T/base"; then echo; fi
        [ ! -s "$T/base" ] || echo
        render_block "$@"
    } >"$T/candidate"
}

# The handlers gvisorgen's block defines, key by key: what containerd must run each with (gvz_judge_handler).
render_block >"$T/block.toml"
for h in $OURS; do gvz_handler_keys "$T/block.toml" "$fprefix.$h" >"$T/want.$h"; done
# (1.x dumps the files it resolved, the validated copy among them: not an import of the live config)
gvz_imports "$T/base" "$T/base.dump" | grep -vxF -e "$GVZ_CHECK" -e "$CONTAINERD_CONFIG" >"$T/imports.all" || true

# A class's handler that gvisorgen did not write is refused, whatever it runs: the class is gvisorgen's to define.
for h in $GVZ_CLASSES; do
    if gvz_dump_defines "$T/base.dump" "$h"; then
        fwhere=$(gvz_handler_files "$T/base" "$T/imports.all" "$h" | tr '\n' ' ' | sed 's/ $//')
        [ -n "$fwhere" ] || fwhere="containerd's merged config (no file names it plainly)"
        gvz_die "a runtime handler $h, the handler of a sandbox class, is defined in $fwhere and gvisorgen did not write it. Refused: pods of that class would run with whatever it runs. Nothing was changed, containerd was not restarted, and the node is not marked ready for gVisor. Fix: remove that handler and let the installer retry, or give the class another handler (gvisor.classes.<name>.handler)"
    fi
done
handwritten=
if gvz_dump_defines "$T/base.dump" runsc; then
    # A runsc handler gvisorgen did not write (by hand, another tool, a drop-in): judged by what it runs, never
    # trusted by its name. Refused unless the user adopts it on purpose (ADOPT_FOREIGN_RUNSC).
    fwhere=$(gvz_handler_files "$T/base" "$T/imports.all" runsc | tr '\n' ' ' | sed 's/ $//')
    [ -n "$fwhere" ] || fwhere="containerd's merged config (no file names it plainly)"
    gvz_handler_keys "$T/base.dump" "$dprefix.runtimes.runsc" >"$T/have.handler"
    if gvz_judge_handler "$T/want.runsc" "$T/have.handler" >"$T/judged"; then
        what="it is key for key the handler gvisorgen would write, but not gvisorgen's (uninstall would take runsc.toml from under it)"
    else
        what="containerd would run it with $(head -n 6 "$T/judged" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    fi
    if [ "$ADOPT_FOREIGN_RUNSC" != true ]; then
        gvz_die "a runsc runtime handler that gvisorgen did not write is defined in $fwhere: $what. Refused: gVisor pods on this node would run with whatever it runs (another runtime type runs them unsandboxed). Nothing was changed, containerd was not restarted, and the node is not marked ready for gVisor. Fix: remove that handler and let the installer retry (it then writes its own), or adopt it as it is with gvisor.host.adoptForeignRunsc: true (you then vouch that it runs gVisor)"
    fi
    handwritten=1
    OURS=$GVZ_CLASSES
    if [ -z "$OURS" ]; then
        gvz_log "WARNING: adopting the runsc runtime handler defined in $fwhere as it is (ADOPT_FOREIGN_RUNSC=true): $what; gvisorgen adds no handler and writes no runsc.toml"
    else
        gvz_log "WARNING: adopting the runsc runtime handler defined in $fwhere as it is (ADOPT_FOREIGN_RUNSC=true): $what; gvisorgen writes no runsc handler and no $RUNSC_CONFIG, only its classes' handlers ($OURS)"
    fi
fi
if [ -z "$OURS" ]; then
    [ -z "$has_block" ] || gvz_log "removing gvisorgen's own block, which would duplicate it"
    cp "$T/base" "$T/candidate"
    validate "$T/candidate" || gvz_die "the existing config does not pass the checks: $WHY"
elif [ "$where" = dropin ]; then
    cp "$T/base" "$T/candidate"
    render_dropin >"$T/dropin"
    validate "$T/candidate" "$T/dropin" ||
        gvz_die "the drop-in fails validation, nothing was written ($GVZ_DROPIN, $CONTAINERD_CONFIG untouched) and containerd was not restarted: $WHY"
else
    default_entry >"$T/default.toml"
    done_=
    # A version 1 or 2 file is read by containerd 1.x and 2.x (2.x migrates both on load): with the minimal runc entry
    # unless the file already defines runc (then containerd rejects the candidate for defining it twice, and the plain
    # block is used; a file with runc's table header is not even tried: a TOML table defined twice is invalid).
    if [ "$fver" -le 2 ] && [ "$defname" = runc ] && ! gvz_dump_has_runtime "$T/base" "${fprefix%.runtimes}" "$defname"; then
        make_candidate "$T/default.toml"
        if validate "$T/candidate"; then
            done_=1
            gvz_log "the block also carries a minimal '$defname' entry: containerd 1.x reads this version $fver file too and would lose its built-in '$defname'"
        fi
    fi
    if [ -z "$done_" ]; then
        make_candidate
        if ! validate "$T/candidate"; then
            if [ -n "$MISSING_DEFAULT" ] && [ -n "$base_has_def" ]; then
                gvz_log "$CONTAINERD_CONFIG defines no runtimes; the block also carries a minimal entry for the default runtime '$defname'"
                make_candidate "$T/default.toml"
                validate "$T/candidate" || gvz_die "the candidate config fails validation, $CONTAINERD_CONFIG is untouched: $WHY"
            else
                gvz_die "the candidate config fails validation, $CONTAINERD_CONFIG is untouched: $WHY"
            fi
        fi
    fi
fi
# Each handler containerd would use with the candidate (its imports and drop-ins merged) must be gvisorgen's, key for key.
gvz_fact "$T/cand.dump" prefix
cprefix=$GVZ_FACT
for h in $OURS; do
    gvz_handler_keys "$T/cand.dump" "$cprefix.runtimes.$h" >"$T/have.handler"
    gvz_judge_handler "$T/want.$h" "$T/have.handler" >"$T/judged" ||
        gvz_die "with gvisorgen's block, containerd would still not run the $h handler as the block says ($(head -n 6 "$T/judged" | tr '\n' ';' | sed 's/;$//; s/;/; /g')): another file it imports overrides it ($(gvz_handler_files "$T/base" "$T/imports.all" "$h" | tr '\n' ' ' | sed 's/ $//')); $CONTAINERD_CONFIG is untouched and containerd was not restarted"
done
# With the install dir on PATH, the handler names the shim by name: containerd finds it on the host's PATH (HOST_PATH,
# systemd's default), where a copy earlier on it would win over the verified one. (runsc.toml names runsc by its path.)
if [ -n "$OURS" ] && [ "$INSTALL_DIR_ON_PATH" = true ]; then
    # "<what PATH finds>" when PATH resolves the shim elsewhere (only when the verified one is there: without it,
    # ready.sh reports the missing binary).
    # shellcheck disable=SC2016 # expanded by the host shell
    gvz_host sh -c 'b=containerd-shim-runsc-v1; [ -e "$1/$b" ] || exit 0; p=$(command -v "$b") || exit 0; [ "$p" = "$1/$b" ] || echo "$p"' sh "$INSTALL_DIR" \
        >"$T/shadowed" 2>/dev/null || true
    if read -r got <"$T/shadowed"; then
        b=containerd-shim-runsc-v1
        gvz_die "on the host's PATH ($HOST_PATH) $b is $got, not the verified $INSTALL_DIR/$b: containerd would run that one for every gVisor pod. Nothing was changed and containerd was not restarted. Fix: remove $got if it is a stale install, or set gvisor.host.installDir to the folder that comes first (or installDirOnPath: false, which names absolute paths)"
    fi
fi
gvz_fact "$T/cand.dump" addr
new_addr=$GVZ_FACT
gvz_fact "$T/base.dump" addr
old_addr=$GVZ_FACT

# --- runsc.toml -----------------------------------------------------------------------------------------------------
# write_runsc_toml HANDLER : HANDLER's runsc.toml (RUNSC_CONFIG for runsc, <handler>.toml beside it for a class), written
# only when its bytes change.
write_runsc_toml() {
    _cf=$(gvz_class_config "$1")
    _hf=$HOST_ROOT$_cf
    {
        echo "# Managed by gvisorgen: options of containerd-shim-runsc-v1 for the $1 runtime. Overwritten on every run."
        # gvisorgen-runsc and the current release's own state root. The shim reads this file for each new container
        # and keeps what it read for that container's life: new sandboxes switch to a new release without a
        # containerd restart, running ones keep theirs (releases.sh); gvisorgen-runsc runs each call with the release
        # whose root holds the container, so a new container in a sandbox an older release started gets that one.
        printf 'binary_name = "%s"\n' "$GVZ_DISPATCH"
        printf 'root = "%s/%s"\n' "$GVZ_RUNSC_ROOTS" "$GVISOR_VERSION"
        echo "[runsc_config]"
        gvz_class_lines "$1"
    } >"$T/runsc.toml"
    if [ -f "$_hf" ] && cmp -s "$T/runsc.toml" "$_hf"; then
        gvz_log "$_cf is up to date"
        return 0
    fi
    if [ ! -d "${RCFG%/*}" ]; then
        # Made with its marker under a temp name, then renamed: a run killed meanwhile leaves a temp folder that
        # the next run recognises and removes, never a folder without the marker (which uninstall would keep).
        rdir=${RCFG%/*}
        rtmp=${rdir%/*}/.${rdir##*/}.gvisorgen-tmp.$$
        GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $rtmp"
        mkdir -m 0755 "$rtmp" || gvz_die "cannot create ${RUNSC_CONFIG%/*}"
        : >"$rtmp/$GVZ_DIR_MARK" || gvz_die "cannot write ${RUNSC_CONFIG%/*}/$GVZ_DIR_MARK"
        { [ ! -e "$rdir" ] && mv "$rtmp" "$rdir" && [ ! -e "$rdir/${rtmp##*/}" ]; } ||
            gvz_die "cannot create ${RUNSC_CONFIG%/*} (made by another writer meanwhile?); the installer retries by itself"
        gvz_log "created ${RUNSC_CONFIG%/*}"
    fi
    gvz_atomic_copy "$T/runsc.toml" "$_hf" 0644 || gvz_die "cannot write $_cf"
    gvz_log "wrote $_cf"
}
# A class's runsc.toml that is there and not gvisorgen's is another writer's: never overwritten.
for h in $GVZ_CLASSES; do
    f=$(gvz_class_config "$h")
    if [ -L "$HOST_ROOT$f" ] || { [ -e "$HOST_ROOT$f" ] && ! gvz_is_managed "$HOST_ROOT$f"; }; then
        gvz_die "$f, the runsc.toml of the class with handler $h, is there and gvisorgen did not write it (its first line is not '$GVZ_MANAGED', or it is a link); not overwriting it. Nothing was changed and containerd was not restarted. Fix: move that file away, the installer retries by itself"
    fi
done
for h in $OURS; do write_runsc_toml "$h"; done
if [ -n "$handwritten" ] && [ -n "$RUNSC_CONFIG_TOML" ]; then
    gvz_log "RUNSC_CONFIG_TOML is not applied: the existing runsc runtime is left exactly as it is"
fi

# --- swap -----------------------------------------------------------------------------------------------------------
changed=
if [ -z "$existed" ] || ! cmp -s "$T/candidate" "$CFG"; then changed=1; fi
# gvisorgen's drop-in: wanted (its candidate) or not (the block in place, or a handler adopted), and what is on disk.
din_want=
if [ "$where" = dropin ] && [ -n "$OURS" ]; then din_want=$T/dropin; fi
din_had=
din_changed=
if [ -n "$DIN" ]; then
    if [ -f "$DIN" ]; then
        cp "$DIN" "$T/din.cur"
        din_had=1
    fi
    if [ -n "$din_want" ]; then
        if [ -z "$din_had" ] || ! cmp -s "$din_want" "$T/din.cur"; then din_changed=1; fi
    elif [ -n "$din_had" ]; then
        din_changed=1
    fi
fi
# din_sig : what containerd's next start reads of gvisorgen's: the config's digest, and the drop-in's ("-" for none).
din_sig() {
    _s=-
    if [ -n "$DIN" ] && [ -f "$DIN" ]; then _s=$(gvz_sha512 "$DIN"); fi
    printf '%s %s\n' "$(gvz_sha512 "$CFG")" "$_s"
}
# runsc.toml as the previous run recorded it (line 3 of the applied marker), for the move below.
old_rdig=$(sed -n 3p "$HOST_ROOT$GVZ_APPLIED" 2>/dev/null || true)
applied_ok=
if [ -f "$HOST_ROOT$GVZ_APPLIED" ] && [ -f "$CFG" ] &&
    [ "$(head -n 1 "$HOST_ROOT$GVZ_APPLIED")" = "$(gvz_sha512 "$CFG")" ]; then
    # and the drop-in it recorded is the one on disk (or it recorded none, and none is wanted)
    _rec=$(awk '$1 == "dropin" { print $2, $3 }' "$HOST_ROOT$GVZ_APPLIED")
    _now=
    if [ -n "$din_want" ] && [ -f "$DIN" ]; then _now="$(gvz_sha512 "$DIN") $GVZ_DROPIN"; fi
    if [ "$_rec" = "$_now" ]; then applied_ok=1; fi
fi
# The drop-in's folder, when gvisorgen creates it (uninstall removes it only then, and only empty): this run, or an
# earlier one as its applied marker records.
din_created=$(awk '$1 == "created" { print $2 }' "$HOST_ROOT$GVZ_APPLIED" 2>/dev/null || true)
if [ -z "$DIN" ] || [ "$din_created" != "${GVZ_DROPIN%/*}" ] || [ ! -d "${DIN%/*}" ]; then din_created=; fi

rm -f "$CHECK" "$HOST_ROOT$GVZ_DROPIN_STAGED"
# The drop-in first: a run killed before the config's swap leaves the handler defined twice, the same in both (the
# next run removes the block); the other order would leave it nowhere.
if [ -n "$din_changed" ]; then
    if [ -n "$din_want" ]; then
        if [ ! -d "${DIN%/*}" ]; then
            mkdir -m 0755 "${DIN%/*}" || gvz_die "cannot create ${GVZ_DROPIN%/*}; nothing was changed"
            din_created=${GVZ_DROPIN%/*}
            gvz_log "created ${GVZ_DROPIN%/*}, which $CONTAINERD_CONFIG imports"
        fi
        snap=
        if [ -n "$din_had" ]; then snap=$T/din.cur; fi
        rc=0
        gvz_cas_replace "$snap" "$din_want" "$DIN" 0644 || rc=$?
        if [ "$rc" -eq 3 ]; then
            gvz_cas_retry
            gvz_die "$GVZ_DROPIN was changed by another writer while gvisorgen validated it, on each of $GVZ_CAS_ATTEMPTS attempts; containerd was not restarted. Fix: none needed if that writer is done, the installer retries by itself"
        fi
        [ "$rc" -eq 0 ] || gvz_die "cannot write $GVZ_DROPIN; nothing was changed"
        gvz_log "wrote $GVZ_DROPIN (the handlers $(echo "$OURS" | sed 's/ /, /g') under the version $fver table $fprefix)"
    else
        { cmp -s "$T/din.cur" "$DIN" && rm -f "$DIN"; } || gvz_die "cannot remove $GVZ_DROPIN (changed meanwhile?); containerd was not restarted, the installer retries by itself"
        if [ -z "$OURS" ]; then
            gvz_log "removed gvisorgen's drop-in $GVZ_DROPIN: the adopted handler stands alone"
        else
            gvz_log "removed gvisorgen's drop-in $GVZ_DROPIN: the runtime goes into gvisorgen's block in $CONTAINERD_CONFIG ($why)"
        fi
    fi
fi
if [ -n "$changed" ]; then
    # The backup keeps the config as it was before gvisorgen first changed it (never overwritten): the snapshot that
    # was read and validated, not whatever the live file holds by now.
    new_backup=
    if [ -n "$existed" ] && [ ! -e "$HOST_ROOT$GVZ_BACKUP" ]; then
        gvz_atomic_copy "$T/current" "$HOST_ROOT$GVZ_BACKUP" "$mode" || gvz_die "cannot write the backup $GVZ_BACKUP; config untouched"
        new_backup=1
    fi
    # Compare-and-swap: the rename happens only if the live file still holds the validated snapshot.
    snap=
    if [ -n "$existed" ]; then snap=$T/current; fi
    rc=0
    gvz_cas_replace "$snap" "$T/candidate" "$CFG" "$mode" || rc=$?
    if [ "$rc" -ne 0 ]; then
        if [ -n "$new_backup" ]; then rm -f "$HOST_ROOT$GVZ_BACKUP"; fi
        if [ "$rc" -eq 3 ]; then
            gvz_cas_retry
            gvz_die "$CONTAINERD_CONFIG was changed by another writer (a node bootstrapper, an operator, another tool) while gvisorgen validated its edit, on each of $GVZ_CAS_ATTEMPTS attempts; nothing was written over it and containerd was not restarted. Fix: none needed if that writer is done, the installer retries by itself and starts over from the new file"
        fi
        gvz_die "cannot replace $CONTAINERD_CONFIG; it is untouched"
    fi
    if [ -n "$new_backup" ]; then gvz_log "backed up $CONTAINERD_CONFIG to $GVZ_BACKUP"; fi
    gvz_log "wrote $CONTAINERD_CONFIG (config version $fver, runtimes table $fprefix.runsc)"
fi

# rollback : the config and the drop-in as this run found them. Status only.
rollback() {
    if [ -n "$changed" ]; then
        if [ -n "$existed" ]; then
            gvz_atomic_copy "$T/current" "$CFG" "$mode" || return 1
        else
            rm -f "$CFG"
        fi
    fi
    if [ -n "$din_changed" ]; then
        if [ -n "$din_had" ]; then
            gvz_atomic_copy "$T/din.cur" "$DIN" 0644 || return 1
        else
            rm -f "$DIN"
        fi
    fi
}

restart=
if [ -n "$changed" ] || [ -n "$din_changed" ]; then
    restart=1
elif [ -n "$OURS" ] && [ -z "$applied_ok" ]; then
    # Never seen running with it. A restart is due, unless CRI lists runsc already, or an earlier run restarted for
    # these very bytes and CRI still did not list it (containerd reads another file): another restart would not help,
    # and every retry of the init container would cost the node one.
    # shellcheck disable=SC2086 # handler names, split on purpose
    if [ "$(gvz_cri_lists_runsc "$new_addr" runsc $GVZ_CLASSES)" = yes ]; then
        gvz_log "$CONTAINERD_CONFIG already holds the runtime and containerd's CRI lists it: no restart"
    elif [ "$(cat "$HOST_ROOT$GVZ_RESTARTED_FOR" 2>/dev/null)" = "$(din_sig)" ]; then
        gvz_log "an earlier run restarted containerd for this very $CONTAINERD_CONFIG: not restarting again"
    else
        gvz_log "$CONTAINERD_CONFIG already holds the runtime, but containerd was never seen running with it: restarting"
        restart=1
    fi
fi

if [ -n "$restart" ]; then
    if ! gvz_restart_containerd "$new_addr"; then
        if [ -z "$changed" ] && [ -z "$din_changed" ]; then
            gvz_die "containerd does not come back with $CONTAINERD_CONFIG; the node needs attention"
        fi
        rollback || gvz_die "containerd does not come back AND restoring the old $CONTAINERD_CONFIG${DIN:+ and $GVZ_DROPIN} failed (backup: $GVZ_BACKUP); the node needs attention"
        gvz_log "rolled back: restored the previous $CONTAINERD_CONFIG${DIN:+ and $GVZ_DROPIN}${existed:+ (the backup stays in $GVZ_BACKUP)}"
        if gvz_restart_containerd "$old_addr"; then
            gvz_die "containerd did not come back with the runsc runtime; rolled back to the previous config and containerd runs again"
        fi
        gvz_die "containerd did not come back with the runsc runtime; rolled back to the previous config, but containerd does not come back either; the node needs attention"
    fi
    din_sig | gvz_atomic_write "$HOST_ROOT$GVZ_RESTARTED_FOR" 0644 || gvz_die "cannot write $GVZ_RESTARTED_FOR"
else
    gvz_log "$CONTAINERD_CONFIG unchanged; no containerd restart"
fi

# The last check of the install, made here because the long-running runsc-ready container cannot ask containerd
# (it is unprivileged and only reads files): containerd serves CRI now, on the socket of the config on disk. After a
# restart, gvz_restart_containerd's wait has just seen exactly that (on new_addr), with nothing done to containerd since.
[ -n "$restart" ] || gvz_cri_ok "$new_addr" || gvz_die "containerd does not answer on $new_addr with its CRI plugin loaded at the end of the run; the installer retries by itself (systemctl status containerd; journalctl -u containerd)"
# And its CRI lists the runsc handler (what RuntimeClass gvisor names): a containerd started with another config file
# (a unit's --config) serves CRI without it, whatever the file on disk says.
# shellcheck disable=SC2086 # handler names, split on purpose
cri_runsc=$(gvz_cri_lists_runsc "$new_addr" runsc $GVZ_CLASSES)
if [ "$cri_runsc" = no ] && [ -n "$din_want" ] && [ -n "$din_changed" ]; then
    # The drop-in is not loaded by the containerd that runs (a unit's --config names another file, or the file it
    # reads imports no such folder): take it back, so that the node is as it was.
    rollback || gvz_die "containerd's CRI on $new_addr does not list $HDESC with gvisorgen's drop-in $GVZ_DROPIN, AND restoring the previous state failed; the node needs attention"
    gvz_restart_containerd "$old_addr" || gvz_die "containerd's CRI on $new_addr does not list $HDESC with gvisorgen's drop-in $GVZ_DROPIN; rolled back, but containerd does not come back; the node needs attention"
    gvz_die "the running containerd does not load gvisorgen's drop-in $GVZ_DROPIN (its CRI on $new_addr lists no runsc handler after the restart), although $CONTAINERD_CONFIG imports it: containerd runs with another config file (a --config in its unit? systemctl cat containerd); rolled back (drop-in removed, containerd restarted) and gVisor pods would have failed with 'no runtime for \"runsc\"'. Fix: point CONTAINERD_CONFIG (gvisor.host.containerdConfig) at the file containerd runs with; the installer retries by itself"
fi
case $cri_runsc in
yes) gvz_log "containerd's CRI on $new_addr lists $HDESC" ;;
no) gvz_die "containerd's CRI on $new_addr does not list $HDESC although $CONTAINERD_CONFIG defines it: the running containerd does not read that file (a --config in its unit? systemctl cat containerd) or drops the runtime (journalctl -u containerd); gVisor pods would fail with 'no runtime for \"runsc\"'. Fix: point CONTAINERD_CONFIG (gvisor.installer.containerdConfig) at the file containerd runs with; the installer retries by itself" ;;
*) gvz_log "CRI's runtime list not checked (${cri_runsc#unknown: }): the config containerd serves CRI with defines runsc (its dump, above)" ;;
esac
# runsc.toml moved (RUNSC_CONFIG changed, e.g. an older gvisorgen's /etc/containerd/runsc.toml): containerd now runs
# with the block naming the new file, so the old one goes, but only when it is gvisorgen's own: its managed header and
# the digest the applied marker recorded for it. A file edited since stays, and so does anything else.
# A class gone from RUNSC_CLASSES: containerd now runs without its handler, so its runsc.toml goes (only gvisorgen's
# own, as the previous run recorded it).
gvz_class_files "$HOST_ROOT$GVZ_APPLIED" | while read -r h sum f; do
    case " $GVZ_CLASSES " in *" $h "*) ;; *) gvz_remove_class_config "$f" "$sum" "the class with handler $h is gone" ;; esac
done
if [ -n "$has_block" ] && [ -z "$handwritten" ]; then
    gvz_remove_moved_runsc_config "$(gvz_block_config_path "$T/current")" "$old_rdig"
fi
rdig=-
if [ -z "$handwritten" ]; then rdig=$(gvz_sha512 "$RCFG"); fi
# The classes whose gate depends on this node (RUNSC_CHECKS): their checks, run on every start of the pod (a bump
# checks again with the new release), the merge patch label-checked-classes applies to the node's labels and the
# Events report-checked-classes creates about the node, in the pod's /tmp (an emptyDir its containers share; nothing
# of it on the host).
gvz_class_gates "$T/gates"
if [ -n "$RUNSC_CHECKS" ]; then
    gvz_gate_patch "$T/gates" | gvz_atomic_write "${TMPDIR:-/tmp}/gvisorgen-gates.json" 0644 ||
        gvz_die "cannot write ${TMPDIR:-/tmp}/gvisorgen-gates.json"
    gvz_gate_events "$T/gates" | gvz_atomic_write "${TMPDIR:-/tmp}/gvisorgen-events.json" 0644 ||
        gvz_die "cannot write ${TMPDIR:-/tmp}/gvisorgen-events.json"
fi
# Every file containerd imports (ready.sh notices a change, a removal, or a new file in an imported folder): the
# patterns, and each file they match now with its digest ("-" outside containerd's config folder, which the probe
# cannot read: those are not watched, and the log says so).
gvz_import_files "$T/imports.all" >"$T/import.files"
{
    printf '%s\n%s\n%s\n' "$(gvz_sha512 "$CFG")" "$new_addr" "$rdig"
    # where the runtime is: the installer's choice for this node (and the drop-in's digest), read by ready.sh and
    # uninstall
    if [ -n "$din_want" ]; then
        printf 'mode dropin %s\ndropin %s %s\n' "$GVZ_DROPIN" "$(gvz_sha512 "$DIN")" "$GVZ_DROPIN"
    elif [ -n "$handwritten" ]; then
        printf 'mode adopted %s\n' "$CONTAINERD_CONFIG"
    else
        printf 'mode block %s\n' "$CONTAINERD_CONFIG"
    fi
    if [ -n "$din_created" ]; then printf 'created %s\n' "$din_created"; fi
    # each checked class's verdict on this node
    awk '{ print "gate", $1, $3 }' "$T/gates"
    # each further class's runsc.toml (ready.sh checks it, uninstall and a later run without the class remove it)
    for h in $GVZ_CLASSES; do
        f=$(gvz_class_config "$h")
        printf 'class %s %s %s\n' "$h" "$(gvz_sha512 "$HOST_ROOT$f")" "$f"
    done
    sed 's/^/import /' "$T/imports.all"
    while IFS= read -r f; do
        case $f in
        "$GVZ_CFG_DIR"/*) printf 'file %s %s\n' "$(gvz_sha512 "$HOST_ROOT$f")" "$f" ;;
        *) printf 'file - %s\n' "$f" ;;
        esac
    done <"$T/import.files"
} >"$T/applied"
while IFS= read -r p; do
    case ${p%/*} in
    "$GVZ_CFG_DIR" | "$GVZ_CFG_DIR"/*) ;;
    *) gvz_log "note: containerd also imports $p, outside $GVZ_CFG_DIR: the readiness probe cannot watch it for changes" ;;
    esac
done <"$T/imports.all"
gvz_atomic_write "$HOST_ROOT$GVZ_APPLIED" 0644 <"$T/applied" || gvz_die "cannot write $GVZ_APPLIED"
if [ -n "$GVZ_CLASSES" ]; then
    gvz_log "done: the runtime handlers $HANDLERS are configured"
else
    gvz_log "done: the runsc runtime is configured"
fi
