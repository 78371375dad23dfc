#!/bin/sh
# wget for the minimal template: busybox's, with -T working.
# Debian 12 builds busybox without FEATURE_WGET_TIMEOUT, and its wget then
# crashes on -T (getopt32 stores the number through a NULL pointer). Scripts
# pass -T everywhere, so -T N / -TN / --timeout=N become timeout(1) here.
t=
n=$#
while [ "$n" -gt 0 ]; do
    a=$1
    shift
    n=$((n - 1))
    case $a in
        -T) t=$1; shift; n=$((n - 1)) ;;
        -T*) t=${a#-T} ;;
        --timeout=*) t=${a#--timeout=} ;;
        *) set -- "$@" "$a" ;;
    esac
done
if [ -n "$t" ]; then
    exec /bin/busybox timeout "$t" /bin/busybox wget "$@"
fi
exec /bin/busybox wget "$@"
