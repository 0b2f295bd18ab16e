#!/bin/sh
# test_install.sh BUILD_DIR SOURCE_DIR DEMO - install the library into a
# fresh prefix and build examples/consumer against the installed files only
# (headers, libtpexport.so.<major>, tpexport.pc, the CMake package): once
# with `pkg-config --cflags --libs tpexport`, once with find_package(tpexport);
# both binaries must run an archive the demo writes. Also checks the shared
# library exports only tp_ symbols and carries the versioned soname.
set -eu
build=$1 src=$2 demo=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp/prefix"/lib*/ | head -n 1)
libdir=${libdir%/}
major=$(sed -n 's/^#define TP_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/tpexport/version.h")
version=$(sed -n 's/^#define TP_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/tpexport/version.h")
for f in "$libdir/libtpexport.so.$major" "$libdir/libtpexport.so.$version" "$libdir/libtpexport.a" \
         "$libdir/pkgconfig/tpexport.pc" "$libdir/cmake/tpexport/tpexportConfig.cmake" \
         "$tmp/prefix/include/tpexport/tpexport.h" "$tmp/prefix/include/tpexport/version.h"; do
    [ -e "$f" ] || fail "not installed: ${f#$tmp/prefix/}"
done
soname=$(readelf -d "$libdir/libtpexport.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libtpexport.so.$major" ] || fail "soname is '$soname', want libtpexport.so.$major"
leaked=$(nm -D --defined-only "$libdir/libtpexport.so.$version" | awk '{print $3}' | grep -v '^tp_[a-z0-9]' || true)
[ -z "$leaked" ] || fail "exported symbols other than tp_*: $(echo "$leaked" | head -n 5 | tr '\n' ' ')"

"$demo" "$tmp/mlp.pt2" >/dev/null
# Copy the consumer out of the tree so nothing resolves against the sources.
mkdir "$tmp/consumer"
cp "$src/examples/consumer/consumer.c" "$src/examples/consumer/CMakeLists.txt" "$tmp/consumer/"

flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs tpexport) || fail "pkg-config"
cc -std=c11 -Wall -Wextra -Werror "$tmp/consumer/consumer.c" $flags -Wl,-rpath,"$libdir" -o "$tmp/consumer_pc"
out=$("$tmp/consumer_pc" "$tmp/mlp.pt2") || fail "pkg-config consumer: $out"
echo "$out" | grep -q "^tpexport $version: program " || fail "pkg-config consumer printed: $out"
echo "$out" | grep -q "^output float32 \[" || fail "pkg-config consumer printed: $out"
ldd "$tmp/consumer_pc" | grep -q "$libdir/libtpexport.so.$major" || fail "consumer does not use the installed .so"

cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null || fail "cmake configure"
cmake --build "$tmp/consumer/build" >/dev/null || fail "cmake build"
out2=$("$tmp/consumer/build/consumer" "$tmp/mlp.pt2") || fail "cmake consumer: $out2"
[ "$out2" = "$out" ] || fail "find_package consumer printed '$out2', pkg-config one '$out'"
echo "$out"
echo "ok: installed prefix builds and runs with pkg-config and find_package(tpexport)"
