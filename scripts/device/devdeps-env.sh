# Sourced by the H200 scripts that carry .devdeps: Debian 12's packages in
# it (libdnnl for oneDNN, CLBlast, OpenBLAS) unpacked under /opt/deps, and
# the environment that lets meson, the compiler and the loader find them
# there (the image has none of them). DEVDEPS: the folder, .devdeps (in
# the tree's root, the current directory) unless set.
mkdir -p /opt/deps /opt/deps/pc
for deb in "${DEVDEPS:-.devdeps}"/*.deb; do
    [ -f "$deb" ] && dpkg -x "$deb" /opt/deps
done
deps=/opt/deps/usr
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LIBRARY_PATH="$deps/lib/x86_64-linux-gnu"
export C_INCLUDE_PATH="$deps/include"
# meson finds libdnnl by its pkg-config file, else as a plain library.
for pc in "$deps"/lib/x86_64-linux-gnu/pkgconfig/dnnl*.pc; do
    [ -f "$pc" ] && sed "s|/usr/|$deps/|g" "$pc" >"/opt/deps/pc/$(basename "$pc")"
done
export PKG_CONFIG_PATH=/opt/deps/pc
