# weir names the partition and a private staging directory for this attempt
printf 'day,greeting\\n%s,hello\\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/greetings.csv"
