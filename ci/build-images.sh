#!/usr/bin/env bash
# Builds the local PostgreSQL images the integration tests run on, without a
# container registry: a minimal Debian root file system from debootstrap, the
# distribution's PostgreSQL package installed into it, then `docker import`.
#
#   pgadvisory/postgres:15   Debian bookworm, postgresql-15
#   pgadvisory/postgres:17   Debian trixie,   postgresql-17
#
# An image that already exists is reused; pass --rebuild to build it anew.
# The container starts a throwaway cluster (trust authentication, port 5432)
# and accepts the same command as the official postgres image, for example
# `postgres -c fsync=off`.
#
# The Debian mirror is the host's: the first Debian archive (not -security)
# in its apt sources, so that the build goes wherever the machine's apt goes.
# --print-mirror prints it and exits, building nothing.
#
# Usage: ci/build-images.sh [--rebuild] [--print-mirror]
# Environment: PGADVISORY_DEBIAN_MIRROR overrides the mirror: the URL of a
#   Debian archive, such as http://MIRROR/debian
set -euo pipefail

rebuild=0
print_mirror=0

usage() {
	sed -n '2,21s/^# \{0,1\}//p' "$0"
}

for arg in "$@"; do
	case "$arg" in
	--rebuild) rebuild=1 ;;
	--print-mirror) print_mirror=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "build-images: unknown argument: $arg" >&2
		usage >&2
		exit 2
		;;
	esac
done

log() { printf '%s build-images: %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
	printf 'build-images: error: %s\n' "$*" >&2
	exit 1
}

# Each image: tag, Debian suite, PostgreSQL major version.
images=(
	"pgadvisory/postgres:15 bookworm 15"
	"pgadvisory/postgres:17 trixie 17"
)

# apt_sources [ETC]: the enabled "deb" entries of the apt sources under ETC
# (default /etc/apt), in the order apt reads them: sources.list, then
# sources.list.d/*.list (one-line format) and *.sources (deb822 format), by
# name. One line per entry and suite: FILE URI SUITE COMPONENTS..., with the
# URI's trailing slash dropped.
apt_sources() {
	local etc="${1:-/etc/apt}" f
	local files=()
	[[ -f $etc/sources.list ]] && files+=("$etc/sources.list")
	for f in "$etc"/sources.list.d/*; do
		case "$f" in *.list | *.sources) [[ -f $f ]] && files+=("$f") ;; esac
	done
	for f in "${files[@]}"; do
		case "$f" in
		*.sources)
			# deb822: stanzas separated by blank lines; a field may go on
			# over lines that start with white space.
			awk -v file="$f" '
				function flush(   n, i, j, t, u, s, deb) {
					deb = 0
					n = split(field["types"], t, " ")
					for (i = 1; i <= n; i++) if (t[i] == "deb") deb = 1
					if (deb && tolower(field["enabled"]) != "no") {
						n = split(field["uris"], u, " ")
						m = split(field["suites"], s, " ")
						for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) {
							sub(/\/+$/, "", u[i])
							print file, u[i], s[j], field["components"]
						}
					}
					split("", field)
					last = ""
				}
				/^#/ { next }
				/^[ \t]*$/ { flush(); next }
				/^[ \t]/ { if (last != "") field[last] = field[last] " " $0; next }
				{
					i = index($0, ":")
					if (i == 0) next
					last = tolower(substr($0, 1, i - 1))
					v = substr($0, i + 1)
					gsub(/^[ \t]+|[ \t]+$/, "", v)
					field[last] = v
				}
				END { flush() }
			' "$f"
			;;
		*)
			# One-line: deb [options] URI SUITE COMPONENTS...
			awk -v file="$f" '
				{ sub(/#.*/, "") }
				$1 != "deb" { next }
				{
					line = $0
					sub(/^[ \t]*deb[ \t]+/, "", line)
					if (substr(line, 1, 1) == "[") sub(/^\[[^]]*\][ \t]*/, "", line)
					n = split(line, w, " ")
					if (n < 2) next
					uri = w[1]
					sub(/\/+$/, "", uri)
					comps = ""
					for (i = 3; i <= n; i++) comps = comps " " w[i]
					print file, uri, w[2], comps
				}
			' "$f"
			;;
		esac
	done
}

# host_mirror [ETC]: prints the URI of the first Debian archive in the apt
# sources under ETC (default /etc/apt), and returns 1 when there is none. A
# Debian archive entry has an http, https or file URI that is not a security
# archive, the component main, and a Debian suite: a release name
# (stable, testing, unstable, the host's codename, the ones this script
# builds, or any in distro-info's debian.csv), or one with -updates,
# -backports or -proposed-updates. That leaves out -security, PostgreSQL's
# bookworm-pgdg, and other vendors' repositories.
host_mirror() {
	local etc="${1:-/etc/apt}"
	local names=" stable testing unstable sid experimental oldstable oldoldstable "
	local spec codename
	for spec in "${images[@]}"; do
		read -r _ codename _ <<<"$spec"
		names+="$codename "
	done
	codename="$(. /etc/os-release 2>/dev/null && [[ ${ID:-} == debian ]] && echo "${VERSION_CODENAME:-}")" || true
	[[ -n $codename ]] && names+="$codename "
	if [[ -r /usr/share/distro-info/debian.csv ]]; then
		names+="$(awk -F, 'NR > 1 && $3 != "" { printf "%s ", $3 }' /usr/share/distro-info/debian.csv)"
	fi
	local file uri suite comps base
	while read -r file uri suite comps; do
		case "$uri" in http://* | https://* | file:/*) ;; *) continue ;; esac
		case "$uri" in *-security | *-security/*) continue ;; esac
		case " $comps " in *" main "*) ;; *) continue ;; esac
		base="${suite%-updates}"
		base="${base%-backports}"
		base="${base%-proposed-updates}"
		case "$names" in *" $base "*) ;; *) continue ;; esac
		echo "$uri"
		return 0
	done < <(apt_sources "$etc")
	return 1
}

# resolve_mirror sets mirror and mirror_from, or fails the build.
resolve_mirror() {
	if [[ -n ${PGADVISORY_DEBIAN_MIRROR:-} ]]; then
		mirror="${PGADVISORY_DEBIAN_MIRROR%/}"
		mirror_from="PGADVISORY_DEBIAN_MIRROR"
	elif mirror="$(host_mirror)"; then
		mirror_from="the host's apt sources"
	else
		die "no Debian archive in the host's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources); set PGADVISORY_DEBIAN_MIRROR to the URL of a Debian mirror, such as http://MIRROR/debian"
	fi
}

if [[ $print_mirror -eq 1 ]]; then
	resolve_mirror
	echo "$mirror"
	exit 0
fi

command -v docker >/dev/null 2>&1 || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (docker info failed)"

todo=()
for spec in "${images[@]}"; do
	read -r tag _ _ <<<"$spec"
	if [[ $rebuild -eq 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
		log "$tag exists, reusing it (pass --rebuild to build it anew)"
	else
		todo+=("$spec")
	fi
done
if [[ ${#todo[@]} -eq 0 ]]; then
	exit 0
fi
# Only a build needs a mirror: existing images are reused on any host.
resolve_mirror

[[ $(id -u) -eq 0 ]] || die "building images needs root (debootstrap and chroot)"
if ! command -v debootstrap >/dev/null 2>&1; then
	log "installing debootstrap"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends debootstrap debian-archive-keyring >/dev/null ||
		die "apt-get install debootstrap failed"
fi

work="$(mktemp -d /tmp/pgadvisory-images.XXXXXX)"
cleanup() {
	local dir
	for dir in "$work"/*/rootfs; do
		[[ -d $dir ]] || continue
		umount -l "$dir/proc" 2>/dev/null || true
		umount -l "$dir/dev/pts" 2>/dev/null || true
	done
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The container's entry point. It runs as user postgres, creates the cluster
# on first start and then becomes the server, so that signals reach it.
write_entrypoint() {
	cat >"$1" <<'ENTRYPOINT'
#!/bin/sh
# Starts a throwaway PostgreSQL: trust authentication, listening on port 5432.
# Arguments are passed to postgres; a leading "postgres" is dropped, so the
# command of the official postgres image works here too. Any other command
# is run as given.
set -eu
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export PGDATA
if [ "$(id -u)" = 0 ]; then
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "$#" -gt 0 ] && [ "$1" = postgres ]; then
	shift
fi
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
	exec "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	initdb --auth=trust -U postgres --no-sync --encoding=UTF8 --locale=C -D "$PGDATA" >/dev/null
	{
		echo "listen_addresses = '*'"
		echo "port = 5432"
		echo "jit = off"
	} >>"$PGDATA/postgresql.conf"
	echo "host all all all trust" >>"$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" "$@"
ENTRYPOINT
	chmod 0755 "$1"
}

# build_one TAG SUITE MAJOR: runs in the background, all output to its log.
build_one() {
	local tag="$1" suite="$2" major="$3"
	local dir="$work/pg$major"
	local root="$dir/rootfs"
	mkdir -p "$dir"

	echo "== debootstrap $suite"
	debootstrap --variant=minbase "$suite" "$root" "$mirror"

	echo "== install postgresql-$major"
	# No service may start inside the chroot, and the package must not
	# create a cluster: the entry point creates one when a container starts.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 0755 "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common"
	echo "create_main_cluster = false" >"$root/etc/postgresql-common/createcluster.conf"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	mount -t proc proc "$root/proc"
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
		sh -ec "apt-get update -q
			apt-get install -y -q --no-install-recommends postgresql-$major
			apt-get clean"
	umount "$root/proc"

	# The JIT provider and its LLVM take most of the space; the tests need
	# neither, and without the provider PostgreSQL runs without JIT.
	echo "== drop the JIT provider"
	chroot "$root" sh -ec "
		pkgs=\$(dpkg-query -W -f '\${db:Status-Abbrev} \${Package}\n' |
			awk '\$1 == \"ii\" && \$2 ~ /^(libllvm|libz3)/ { print \$2 }')
		if [ -n \"\$pkgs\" ]; then dpkg --purge --force-depends \$pkgs; fi"
	rm -rf "$root/usr/lib/postgresql/$major/lib/llvmjit"* "$root/usr/lib/postgresql/$major/lib/bitcode"

	echo "== finish the file system"
	write_entrypoint "$root/usr/local/bin/pgadvisory-entrypoint"
	mkdir -p "$root/var/lib/postgresql" "$root/var/run/postgresql"
	chroot "$root" chown postgres:postgres /var/lib/postgresql /var/run/postgresql
	chmod 2775 "$root/var/run/postgresql"
	rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
	rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* \
		"$root"/var/cache/debconf/*-old "$root"/var/log/* "$root"/tmp/* \
		"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
		"$root"/usr/share/locale/* "$root"/usr/share/postgresql/*/man
	rm -rf "$root"/dev/*

	echo "== docker import $tag"
	local bin="/usr/lib/postgresql/$major/bin"
	local old
	old="$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
	tar --numeric-owner -C "$root" -cf - . |
		docker import \
			--change 'ENTRYPOINT ["/usr/local/bin/pgadvisory-entrypoint"]' \
			--change 'CMD ["postgres"]' \
			--change 'USER postgres' \
			--change 'EXPOSE 5432' \
			--change "ENV PATH=$bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
			--change 'ENV PGDATA=/var/lib/postgresql/data' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'WORKDIR /var/lib/postgresql' \
			--message "PostgreSQL $major on Debian $suite for pgadvisory tests" \
			- "$tag"
	rm -rf --one-file-system "$root"
	# A rebuilt image leaves the old one untagged; drop it unless in use.
	if [[ -n $old && $old != "$(docker image inspect --format '{{.Id}}' "$tag")" ]]; then
		docker rmi "$old" >/dev/null 2>&1 || true
	fi
}

log "Debian mirror $mirror (from $mirror_from)"
start=$SECONDS
pids=()
for spec in "${todo[@]}"; do
	read -r tag suite major <<<"$spec"
	log "building $tag from Debian $suite (log: $work/pg$major.log)"
	(
		t0=$SECONDS
		build_one "$tag" "$suite" "$major" >"$work/pg$major.log" 2>&1
		echo "$((SECONDS - t0))" >"$work/pg$major.seconds"
	) &
	pids+=("$!")
done

failed=0
for i in "${!todo[@]}"; do
	read -r tag suite major <<<"${todo[$i]}"
	if wait "${pids[$i]}"; then
		log "built $tag in $(cat "$work/pg$major.seconds")s"
	else
		failed=1
		echo "build-images: error: building $tag failed; last lines of its log:" >&2
		tail -n 40 "$work/pg$major.log" | sed 's/^/    /' >&2
	fi
done
[[ $failed -eq 0 ]] || exit 1
log "all images built in $((SECONDS - start))s"
docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' 'pgadvisory/postgres'
