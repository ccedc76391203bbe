#!/bin/sh
# ready.sh: readiness probe of the runsc-installer DaemonSet's main container (exec probe: sh /gvisorgen/ready.sh).
#
# Exit 0 only when the node's state on disk is what the mode asks for, so that `kubectl rollout status` of the DaemonSet
# means "every node has gVisor" (or, in uninstall mode, "no node has it any more"). It only reads files (the container
# is unprivileged, root filesystem and host mounts read-only, and runs no host command): containerd's CRI was checked
# by the init containers (configure-containerd verifies it last, before the pod can become Ready). Ready means
# "installed, configured and verified at install, and still intact on disk":
#   install mode:   the stamp in INSTALL_DIR names GVISOR_VERSION and this arch, every installed file it lists exists,
#                   is executable and still has the sha512 the stamp records (or has not changed on disk since
#                   install-runsc hashed it there, see gvz_seen in lib.sh), CONTAINERD_CONFIG is byte for byte the
#                   config that configure-containerd validated and saw containerd serve CRI with
#                   (CONTAINERD_CONFIG.gvisorgen-applied), gvisorgen's drop-in (when the marker names one) is byte for
#                   byte the one it wrote, and, with the block or the drop-in, runsc.toml is byte for byte the one
#                   configure-containerd wrote;
#                   uninstall mode also: no gvisorgen drop-in where the config imports a folder for one;
#   uninstall mode: no stamp, no runsc/shim that gvisorgen installed, no gvisorgen block in the config, no
#                   gvisorgen runsc.toml, no applied marker.
# Cost per run: one stat of the installed files, and a sha512 of each one whose identity on disk (device, inode, size,
# mtime, ctime) is not the one install-runsc recorded when it hashed it (none, unless something wrote to it: a release
# is ~200 MB, and this runs every 30 s by default on every node); a sha512 of the config, the drop-in and each runsc.toml.
# Environment: the same as the init containers (HOST_ROOT GVISOR_MODE GVISOR_VERSION INSTALL_DIR CONTAINERD_CONFIG
#   RUNSC_CONFIG); the generator must set them on the main container too.
set -eu
GVZ_NAME=ready
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/lib.sh"
# shellcheck source-path=SCRIPTDIR source=classes.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/classes.sh"
# shellcheck disable=SC2086 # list of applet names
gvz_need_applets $GVZ_BASE_APPLETS uname
gvz_load_env
gvz_check_classes

IDIR=$HOST_ROOT$INSTALL_DIR
STAMP=$HOST_ROOT$GVZ_STAMP
CFG=$HOST_ROOT$CONTAINERD_CONFIG
APPLIED=$HOST_ROOT$GVZ_APPLIED
RCFG=$HOST_ROOT$RUNSC_CONFIG

not_ready() {
    echo "not ready: $*" >&2
    exit 1
}

has_block() { [ -f "$CFG" ] && grep -qxF "$GVZ_BEGIN" "$CFG"; }

if [ "$GVISOR_MODE" = install ]; then
    gvz_check_version
    arch=$(gvz_arch)
    [ -f "$STAMP" ] || not_ready "no stamp $GVZ_STAMP: gVisor is not installed"
    [ "$(awk '$1 == "version" { print $2 }' "$STAMP")" = "$GVISOR_VERSION" ] || not_ready "the stamp does not name $GVISOR_VERSION"
    [ "$(awk '$1 == "arch" { print $2 }' "$STAMP")" = "$arch" ] || not_ready "the stamp does not name $arch"
    # The current release's files, the shim and gvisorgen-runsc in INSTALL_DIR; older releases kept for their
    # sandboxes are not the gate's.
    cur=$GVZ_RELEASES_NAME/$GVISOR_VERSION
    files=$(gvz_current_files "$STAMP" "$GVISOR_VERSION")
    paths=$(printf '%s\n' "$files" | awk '{ print $2 }')
    # shellcheck disable=SC2086 # the stamp's paths: no blanks (gVisor's own file names)
    for f in "$cur/runsc" "$cur/containerd-shim-runsc-v1" containerd-shim-runsc-v1 "$GVZ_DISPATCH_NAME" $paths; do
        if [ ! -f "$IDIR/$f" ] || [ ! -x "$IDIR/$f" ]; then not_ready "$INSTALL_DIR/$f is missing or not executable"; fi
    done
    # Hashed again only when the file's identity on disk is not the one install-runsc recorded in the stamp ("seen"
    # lines, taken before it hashed the installed files; a stamp written before gvisorgen recorded them: every file).
    # shellcheck disable=SC2086 # the stamp's paths: no blanks (gVisor's own file names)
    same=$(gvz_seen "$IDIR" $paths 2>/dev/null | gvz_seen_unchanged "$STAMP")
    nl='
'
    printf '%s\n' "$files" | while read -r sum f; do
        case "$nl$same$nl" in *"$nl$f$nl"*) continue ;; esac
        [ "$(gvz_sha512 "$IDIR/$f")" = "$sum" ] || not_ready "$INSTALL_DIR/$f no longer has the sha512 the stamp records (changed since install-runsc verified it)"
    done
    [ -f "$CFG" ] || not_ready "no $CONTAINERD_CONFIG"
    [ -r "$CFG" ] || not_ready "cannot read $CONTAINERD_CONFIG (mode $(stat -c %a "$CFG")): the probe runs unprivileged and needs it readable"
    [ -f "$APPLIED" ] || not_ready "containerd was never seen running with the runsc runtime ($GVZ_APPLIED missing)"
    [ "$(head -n 1 "$APPLIED")" = "$(gvz_sha512 "$CFG")" ] || not_ready "$CONTAINERD_CONFIG changed since configure-containerd validated it"
    # gvisorgen's drop-in, where configure-containerd chose one (the applied marker's "dropin" line)
    din=$(awk '$1 == "dropin" { print $2, $3 }' "$APPLIED")
    if [ -n "$din" ]; then
        f=${din#* }
        [ -f "$HOST_ROOT$f" ] || not_ready "gvisorgen's drop-in $f is gone since configure-containerd validated it"
        [ "$(gvz_sha512 "$HOST_ROOT$f")" = "${din%% *}" ] || not_ready "gvisorgen's drop-in $f changed since configure-containerd validated it"
    fi
    if has_block || [ -n "$din" ]; then
        [ -f "$RCFG" ] || not_ready "$RUNSC_CONFIG is missing"
        [ "$(sed -n 3p "$APPLIED")" = "$(gvz_sha512 "$RCFG")" ] || not_ready "$RUNSC_CONFIG changed since configure-containerd wrote it"
    fi
    # Each further class's runsc.toml, as configure-containerd recorded it (every class of RUNSC_CLASSES has one).
    for h in $GVZ_CLASSES; do
        rec=$(gvz_class_files "$APPLIED" | awk -v h="$h" '$1 == h { print $2, $3 }')
        [ -n "$rec" ] || not_ready "configure-containerd never configured the class with handler $h ($GVZ_APPLIED has no class $h line)"
        f=${rec#* }
        [ -f "$HOST_ROOT$f" ] || not_ready "$f, the runsc.toml of the class with handler $h, is missing"
        [ "$(gvz_sha512 "$HOST_ROOT$f")" = "${rec%% *}" ] || not_ready "$f, the runsc.toml of the class with handler $h, changed since configure-containerd wrote it"
    done
    # Every file containerd imports, as configure-containerd recorded it when it judged the runsc handler: a change,
    # a removal, or a new file in an imported folder may redefine the handler, which only the installer (privileged,
    # it asks containerd) can judge again. Files outside containerd's config folder (recorded as "-") are not mounted.
    sed -n 's/^file \([0-9a-f]\{128\} .*\)$/\1/p' "$APPLIED" | while IFS= read -r rec; do
        sum=${rec%% *} f=${rec#* }
        [ -f "$HOST_ROOT$f" ] || not_ready "$f, which containerd imports, is gone since configure-containerd judged the runsc handler (restart the installer's pod to judge it again)"
        [ "$(gvz_sha512 "$HOST_ROOT$f")" = "$sum" ] || not_ready "$f, which containerd imports, changed since configure-containerd judged the runsc handler (it may redefine it: restart the installer's pod to judge it again)"
    done
    sed -n 's/^import //p' "$APPLIED" | while IFS= read -r p; do
        d=${p%/*}
        case $d in "$GVZ_CFG_DIR" | "$GVZ_CFG_DIR"/*) ;; *) continue ;; esac
        case $d in *[*?[\\]*) continue ;; esac
        [ -d "$HOST_ROOT$d" ] || continue
        find "$HOST_ROOT$d" -mindepth 1 -maxdepth 1 ! -type d | while IFS= read -r hf; do
            f=${hf#"$HOST_ROOT"}
            case $f in "$CONTAINERD_CONFIG" | "$GVZ_CHECK" | "$GVZ_DROPIN_STAGED" | "$GVZ_APPLIED" | "$GVZ_BACKUP" | *.gvisorgen-tmp.*) continue ;; esac
            gvz_import_matches "$p" "$f" || continue
            awk -v f="$f" 'index($0, "file ") == 1 && substr($0, 135) == f { found = 1 } END { exit !found }' "$APPLIED" ||
                not_ready "a new file $f, which containerd imports ($p), appeared since configure-containerd judged the runsc handler (it may redefine it: restart the installer's pod to judge it again)"
        done
    done
else
    [ ! -e "$STAMP" ] || not_ready "the stamp $GVZ_STAMP is still there"
    ! has_block || not_ready "gvisorgen's block is still in $CONTAINERD_CONFIG"
    if [ -f "$CFG" ]; then
        din=$(gvz_dropin_path "$CFG")
        if [ -n "$din" ] && gvz_is_managed "$HOST_ROOT$din"; then not_ready "gvisorgen's drop-in $din is still there"; fi
    fi
    [ ! -e "$APPLIED" ] || not_ready "$GVZ_APPLIED is still there"
    for h in runsc $GVZ_CLASSES; do
        f=$(gvz_class_config "$h")
        if [ -f "$HOST_ROOT$f" ] && head -n 1 "$HOST_ROOT$f" | grep -q '^# Managed by gvisorgen'; then not_ready "$f is still there"; fi
    done
fi
exit 0
