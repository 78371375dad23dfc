# Sourced by scripts/setup and scripts/test: where a run spends its time.
# timing_mark LABEL appends "LABEL<TAB>seconds since the last mark" to
# $AIRLOCK_TIMING (when set); timing_table prints the file as a table.
timing_last=${timing_last:-$(date +%s)}
timing_mark() {
  local now; now=$(date +%s)
  [[ -n ${AIRLOCK_TIMING:-} ]] && printf '%s\t%d\n' "$1" $((now - timing_last)) >>"$AIRLOCK_TIMING"
  timing_last=$now
}
timing_table() {
  [[ -n ${AIRLOCK_TIMING:-} && -s $AIRLOCK_TIMING ]] || return 0
  echo "== where the time went (seconds; lane entries run two at a time beside the ASan and fuzz builds; the sanitized tests beside the entries that run alone)"
  awk -F'\t' '{ printf "  %-40s %6d\n", $1, $2; if ($1 !~ /^  /) total += $2 }
    END { printf "  %-40s %6d\n", "total", total }' "$AIRLOCK_TIMING"
}
