# Lab environment for non-interactive shells (pointed to by BASH_ENV on the lab cluster):
# defines `module` and loads the lab's default module collection, so every pipeline script sees the same
# tool paths and settings as an interactive login.
MODULEPATH="${SITE_ROOT:?}/env/modulefiles"
export MODULEPATH

_mod_apply() {                        # _mod_apply <modulefile>
    local verb name value
    while read -r verb name value; do
        case "$verb" in
            setenv)       export "$name=$value" ;;
            prepend-path) eval "export $name=\"$value\${$name:+:\$$name}\"" ;;
            append-path)  eval "export $name=\"\${$name:+\$$name:}$value\"" ;;
            conflict|prereq|'#'*|'') ;;
            *) echo "site_modules: unknown verb '$verb' in $1" >&2 ;;
        esac
    done < "$1"
}

module() {                            # module load <name>[/<version>] ...
    local sub=$1 m f; shift
    [ "$sub" = load ] || return 0
    for m in "$@"; do
        f=$(ls -1 "$MODULEPATH/${m%%/*}"/* 2>/dev/null | sort -V | tail -n 1)
        [ -n "$f" ] && _mod_apply "$f"
    done
}

# default collection: everything the lab ships
for _d in "$MODULEPATH"/*/; do
    for _f in "$_d"*; do
        _mod_apply "$_f"
    done
done
unset _d _f
