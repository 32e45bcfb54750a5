# tests/engine-lib.sh - a Docker engine of one's own, for the real-engine
# tests (tests/blackbox/engine.sh) and bench/container. Source it, set
# E_DIR (a new directory) and E_IMG, then engine_start (0, with
# DOCKER_HOST exported and E_UP saying what runs; or 1 with E_WHY saying
# why not); engine_stop at the end, from a trap. The dockerd has its own
# data root, exec root, pid file, socket and containerd namespace, so
# that nothing collides with another engine on the host.
# E_EXTRA: more host files to put in the image, "PATH" (at the same
# path) or "PATH:PATH-IN-IMAGE", separated by spaces.

engine_stop() {
	[ -n "$E_PID" ] || return 0
	local ids
	ids=$(docker ps --all --quiet 2>/dev/null)
	# shellcheck disable=SC2086
	[ -z "$ids" ] || docker rm --force $ids >/dev/null 2>&1
	kill -TERM "$E_PID" 2>/dev/null
	local end=$((SECONDS + 15))
	while kill -0 "$E_PID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
	kill -9 "$E_PID" 2>/dev/null
	# Its containerd and shims, should dockerd have died without them.
	local p
	for p in $(pgrep -f -- "$E_DIR/" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	# Whatever it left mounted under its directory, deepest first.
	awk -v d="$E_DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null; done
	E_PID=
}

# image_root DIR: the tree of the test image. The static busybox and its
# applets, a passwd and group; and, for the escape battery, the host's
# python3 with only the modules and shared libraries the probes load. One
# python process does it: a fork per applet link costs seconds on a
# loaded machine.
image_root() {
	E_EXTRA=${E_EXTRA:-} /usr/bin/python3 - "$1" <<-'EOF'
	import ctypes, errno, json, mmap, os, pty, re, shutil, signal, socket, struct, subprocess, sys, time
	import encodings.idna
	r = sys.argv[1]
	def put(src, dst=None):
	    dst = r + (dst or src)
	    os.makedirs(os.path.dirname(dst), exist_ok=True)
	    shutil.copy2(src, dst, follow_symlinks=True)
	for d in ("bin", "etc", "tmp", "work", "run/kart/out", "proc", "dev", "sys", "usr/bin"):
	    os.makedirs(os.path.join(r, d), exist_ok=True)
	os.chmod(os.path.join(r, "tmp"), 0o1777)
	put("/bin/busybox")
	applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
	for a in applets:
	    if a != "busybox":
	        os.symlink("busybox", os.path.join(r, "bin", a))
	with open(os.path.join(r, "etc/passwd"), "w") as f:
	    f.write("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")
	with open(os.path.join(r, "etc/group"), "w") as f:
	    f.write("root:x:0:\nnogroup:x:65534:\n")
	files = {os.path.realpath(sys.executable)}
	for m in list(sys.modules.values()):
	    f = getattr(m, "__file__", None)
	    if f and os.path.isfile(f):
	        files.add(os.path.realpath(f))
	for f in files:
	    put(f)
	objs = [f for f in files if f.endswith(".so") or f == os.path.realpath(sys.executable)]
	out = subprocess.run(["ldd"] + objs, capture_output=True, text=True).stdout
	libs = set(re.findall(r"=> (/\S+)", out)) | set(re.findall(r"^\s+(/\S+) \(", out, re.M))
	for lib in libs:
	    put(lib)
	    # /lib and /lib64 are links into /usr on the host: both names
	    if lib.startswith("/lib"):
	        put(lib, "/usr" + lib)
	os.symlink(os.path.realpath(sys.executable), os.path.join(r, "usr/bin/python3"))
	for f in os.environ.get("E_EXTRA", "").split():
	    src, _, dst = f.partition(":")
	    put(src, dst or None)
	EOF
}

engine_start() {
	command -v dockerd >/dev/null || { E_WHY="dockerd is missing (package docker.io)"; return 1; }
	command -v docker >/dev/null || { E_WHY="the docker CLI is missing (package docker.io)"; return 1; }
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
		{ E_WHY="no static /bin/busybox (package busybox-static)"; return 1; }
	[ -x /usr/bin/python3 ] || { E_WHY="no /usr/bin/python3 (the escape probes, and the image's set-up)"; return 1; }
	mkdir -p "$E_DIR"
	export DOCKER_HOST=unix://$E_DIR/docker.sock
	dockerd --iptables=false --ip6tables=false --bridge=none \
		--exec-opt native.cgroupdriver=cgroupfs --storage-driver=overlay2 \
		--data-root "$E_DIR/data" --exec-root "$E_DIR/exec" --pidfile "$E_DIR/dockerd.pid" \
		--containerd-namespace "kart-test-$$" --containerd-plugins-namespace "kart-test-$$-p" \
		-H "$DOCKER_HOST" >"$E_DIR/dockerd.log" 2>&1 &
	E_PID=$!
	local t0=$SECONDS
	# The image's tree, while the engine starts.
	image_root "$E_DIR/root" 2>"$E_DIR/root.err" || { E_WHY="cannot build the image's tree: $(tail -1 "$E_DIR/root.err")"; return 1; }
	until docker info >/dev/null 2>&1; do
		if ! kill -0 "$E_PID" 2>/dev/null || [ $((SECONDS - t0)) -ge 30 ]; then
			E_WHY="dockerd did not start: $(tail -2 "$E_DIR/dockerd.log" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.1
	done
	tar --numeric-owner -C "$E_DIR/root" -c . |
		docker import -c 'CMD ["/bin/sh"]' - "$E_IMG" >/dev/null 2>"$E_DIR/import.err" ||
		{ E_WHY="docker import failed: $(cat "$E_DIR/import.err")"; return 1; }
	E_UP="dockerd $(docker version --format '{{.Server.Version}}'), up in $((SECONDS - t0))s"
}
