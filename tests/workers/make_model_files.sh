#!/usr/bin/env bash
# The model files that the worker and LibTorch tests load, written once per test run (CTest's
# fixture `worker_model_files`) rather than once per test process: gtest runs every test in a
# process of its own, and each used to write its files again (importing TensorFlow or torch,
# 5-15 s each time). Two lanes in parallel, one per framework:
#   TensorFlow (PYTHON): tf_while_loop, tf_cond, tf_keras (absent when Keras is missing), token_saved,
#   digits_saved, digits_saved_fixed, digits_saved_unused, digits_keras (absent when Keras is missing)
#   torch (PYTHON): token.pt2, cnn.pt2, digits_mlp.pt2, digits_static.pt2 (torch.export); Debian's
#   /usr/bin/python3 (torch 1.13): token.pt
# Usage: tests/workers/make_model_files.sh PYTHON OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "error: usage: make_model_files.sh PYTHON OUT_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
python=$1 out=$2
rm -rf "$out"
mkdir -p "$out"
export TF_CPP_MIN_LOG_LEVEL=2
tensorflow_lane() {
  local status=0
  "$python" "$here/make_tf_loop_model.py" while_loop "$out/tf_while_loop" cond "$out/tf_cond" keras "$out/tf_keras" ||
    status=$?
  [ "$status" = 0 ] || [ "$status" = 77 ] || return "$status"  # 77: no Keras, no tf_keras
  "$python" "$here/make_token_model.py" savedmodel "$out/token_saved"
  "$python" "$here/make_digits_saved_models.py" "$out"
}
torch_lane() {
  /usr/bin/python3 "$here/make_token_model.py" torchscript "$out/token.pt"
  "$python" "$here/make_token_model.py" export "$out/token.pt2"
  "$python" "$here/export_program.py" cnn 2 "$out/cnn.pt2"
  "$python" "$here/make_digits_programs.py" "$out"
}
tensorflow_lane > "$out/tensorflow.log" 2>&1 &
tf_pid=$!
torch_lane > "$out/torch.log" 2>&1 &
torch_pid=$!
failed=0
wait "$tf_pid" || { echo "error: writing the TensorFlow models failed:" >&2; tail -20 "$out/tensorflow.log" >&2; failed=1; }
wait "$torch_pid" || { echo "error: writing the torch models failed:" >&2; tail -20 "$out/torch.log" >&2; failed=1; }
exit "$failed"
