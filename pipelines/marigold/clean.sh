#!/bin/sh
# clean: keep the readings the gateway marked valid, round to one decimal and
# stamp each row with the code_version that cleaned it.
set -eu
awk -F, -v version="$WEIR_CODE_VERSION" '
  NR == 1 { print "sensor_id,reading_at,celsius,code_version"; next }
  $4 == "1" { printf "%s,%s,%.1f,%s\n", $1, $2, $3, version }
' "$WEIR_INPUT_RAW_READINGS" > "$WEIR_OUTPUT_DIR/clean_readings.csv"
