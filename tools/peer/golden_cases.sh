# Sourced by make-logits-goldens.sh and make-embedding-goldens.sh: the loop
# over a cases.tsv (columns: name arch type vocab embd layers heads kv ff
# seed, then optional fields told apart by their form: "all" or
# "converted" for the tensors, "E/K" for gen-model --experts E
# --experts-used K, "tied" for --tied, "hd=N" for --head-dim N, "kv=f16" for
# llama.cpp's f16 KV cache (the test then uses Cortiq's), "rel=X" and
# "clean=N" for the test's bounds only). For each case (or those ONLY, a regular expression,
# matches) `cortiq gen-model` writes the model into $WORK and the caller's
# `golden_case NAME MODEL IDS` runs llama.cpp on it; IDS is a fixed walk of
# 64 ids over the model's vocabulary (the tests use the same formula).
# Needs CORTIQ, VOCAB and WORK set.

sequence() {
  local n_vocab=$1 ids="" i
  for ((i = 0; i < 64; i++)); do ids+="$(( 1 + (i * 7919 + 13) % (n_vocab - 1) )) "; done
  echo "$ids"
}

each_case() {
  local cases=$1 name arch type vocab embd layers heads kv ff seed rest field tensors experts model n_vocab extra peer_args
  grep -v '^#' "$cases" | while IFS=$'\t' read -r name arch type vocab embd layers heads kv ff seed rest; do
    [ -n "$name" ] || continue
    tensors="" experts="" extra=() peer_args=()
    for field in $rest; do
      case $field in
        rel=* | clean=*) ;;
        kv=f16) peer_args+=(--kv-f16) ;;
        tied) extra+=(--tied) ;;
        hd=*) extra+=(--head-dim "${field#hd=}") ;;
        */*) experts=$field ;;
        *) tensors=$field ;;
      esac
    done
    [ -z "${ONLY:-}" ] || [[ $name =~ $ONLY ]] || continue
    model="$WORK/$name.gguf"
    local args=(--arch "$arch" --type "$type" --embd "$embd" --layers "$layers" --heads "$heads"
                --kv-heads "$kv" --ff "$ff" --seed "$seed" -o "$model")
    [ "$vocab" = builtin ] || args+=(--vocab-from "$VOCAB/ggml-vocab-$vocab.gguf")
    [ "${tensors:-converted}" = all ] && args+=(--all-tensors)
    [ -z "${experts:-}" ] || args+=(--experts "${experts%/*}" --experts-used "${experts#*/}")
    "$CORTIQ" gen-model "${args[@]}" "${extra[@]}" >/dev/null
    n_vocab=$("$CORTIQ" inspect "$model" --json | python3 -c 'import json,sys; print([m["value"] for m in json.load(sys.stdin)["metadata"] if m["key"].endswith(".vocab_size")][0])')
    golden_case "$name" "$model" "$(sequence "$n_vocab")" "${peer_args[@]}"
  done
}
