#!/bin/sh
# gvisorgen-runsc: the runsc that runsc.toml names (binary_name) on a node that keeps several gVisor releases side by
# side (releases.sh). Not run in the installer's pod: install-runsc writes it to INSTALL_DIR/gvisorgen-runsc with this
# node's paths in the GVZ_D_ lines below, and the shim (containerd-shim-runsc-v1) runs it on the host, as root, in
# place of runsc for every call, with --root=<state root>/<containerd namespace> first (runsc.toml's root as the shim
# read it when it created that container).
#
# Why: the shim reads runsc.toml again for every new container, also one that joins a running sandbox (a restarted
# container, an ephemeral debug container). After a bump it names the new release's runsc and state root, which do not
# know a sandbox an older release started: runsc would fail with "cannot load sandbox". So each call goes to the
# release whose state root holds runsc's state file of the container it names (<container>_sandbox:<sandbox>.state),
# or, for a new container joining a sandbox (create with the bundle's io.kubernetes.cri.container-type "container"),
# of that sandbox (io.kubernetes.cri.sandbox-id); anything else (a new sandbox, a container no root knows, list) to the
# release of the root the shim passed. The root the shim passed is searched first, so a node on one release always
# runs that release's runsc with the arguments unchanged. Then exec: the shim's child, its pid and its signals are
# runsc's. Only shell builtins on every call but create (which reads config.json with sed, once per container).
#
# What it reads: its arguments (from the shim), the names of runsc's state files under gvisorgen's state roots, a
# bundle's config.json (the container's OCI spec, written by containerd: the two annotations above, which containerd
# sets itself). It chooses only among gvisorgen's own releases' runsc; runsc then checks the sandbox and container it
# is given as always, so a wrong choice makes a call fail, never joins another sandbox.
set -eu

# install-runsc replaces each of these lines with the node's value (releases.sh, gvz_dispatcher_text)
GVZ_D_RELEASES=/usr/local/bin/gvisor-releases
GVZ_D_ROOTS=/run/gvisorgen/runsc
GVZ_D_LEGACY_ROOT=/run/containerd/runsc
GVZ_D_LEGACY_BIN=/usr/local/bin/runsc
GVZ_D_CONFIG=/etc/containerd/runsc/runsc.toml

die() {
    echo "gvisorgen-runsc: $*" >&2
    exit 1
}

# release_of ROOT : sets bin to the runsc of the release whose state root is ROOT; status 1 for any other folder.
release_of() {
    case $1 in
    "$GVZ_D_LEGACY_ROOT") bin=$GVZ_D_LEGACY_BIN ;;
    "$GVZ_D_ROOTS"/*)
        _v=${1#"$GVZ_D_ROOTS"/}
        case $_v in '' | . | .. | */*) return 1 ;; esac
        bin=$GVZ_D_RELEASES/$_v/runsc
        ;;
    *) return 1 ;;
    esac
}

# valid_id ID : ID may name a container (runsc's own rule, without the glob characters a shell would expand).
valid_id() {
    case $1 in '' | *[!A-Za-z0-9._+-]*) return 1 ;; esac
}

# find_state SUFFIX : sets found to the first state root (the passed one, then each release's, then the unversioned
# install's) whose folder for this namespace holds a file <...>SUFFIX, a glob tail such as "<id>_sandbox:*.state".
find_state() {
    for _r in "$base" "$GVZ_D_ROOTS"/* "$GVZ_D_LEGACY_ROOT"; do
        for _f in "$_r/$ns/"$1; do
            if [ -e "$_f" ]; then
                found=$_r
                return 0
            fi
        done
    done
    return 1
}

# No --root (a person, the shim's version query): the current release, the one runsc.toml's root names.
case ${1-} in
--root=*)
    root=${1#--root=}
    shift
    ;;
*)
    cur=$GVZ_D_LEGACY_ROOT
    if [ -f "$GVZ_D_CONFIG" ]; then
        while IFS= read -r _l; do
            case $_l in 'root = "'*'"') cur=${_l#'root = "'} && cur=${cur%'"'} ;; '['*) break ;; esac
        done <"$GVZ_D_CONFIG"
    fi
    release_of "$cur" || die "$GVZ_D_CONFIG names the state root $cur, which is no gVisor release's of gvisorgen's"
    exec "$bin" "$@"
    ;;
esac
ns=${root##*/}
base=${root%/*}
case $ns in '' | . | ..) die "--root=$root names no containerd namespace (<state root>/<namespace>)" ;; esac
release_of "$base" || die "--root=$root is not under a state root of gvisorgen's ($GVZ_D_ROOTS/<release>, $GVZ_D_LEGACY_ROOT)"

# The container a call names: the last argument, or the one before it (kill <id> <signal>). The subcommand's own flag
# values are paths, numbers or words that no state file is named after.
last=
prev=
bundle=
want_bundle=
for a; do
    prev=$last
    last=$a
    if [ -n "$want_bundle" ]; then
        bundle=$a
        want_bundle=
    fi
    case $a in
    --bundle | -bundle | -b) want_bundle=1 ;;
    --bundle=* | -bundle=* | -b=*) bundle=${a#*=} ;;
    esac
done

found=
for id in "$last" "$prev"; do
    if valid_id "$id" && find_state "${id}_sandbox:*.state"; then break; fi
done
# A new container: where its sandbox is, when it joins one.
if [ -z "$found" ] && [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
    ann() { sed -n "s/.*\"io\\.kubernetes\\.cri\\.$1\"[[:space:]]*:[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" "$bundle/config.json" | head -n 1; }
    if [ "$(ann container-type)" = container ]; then
        sid=$(ann sandbox-id)
        if valid_id "$sid"; then find_state "*_sandbox:${sid}.state" || true; fi
    fi
fi
if [ -n "$found" ] && [ "$found" != "$base" ]; then
    release_of "$found"
    [ -x "$bin" ] || die "the state of this container is in $found/$ns, but that release's runsc ($bin) is gone"
    exec "$bin" "--root=$found/$ns" "$@"
fi
exec "$bin" "--root=$root" "$@"
