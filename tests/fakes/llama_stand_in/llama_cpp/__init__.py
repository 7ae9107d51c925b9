"""A stand-in for llama-cpp-python: only `llama_cpp.server`, which crashes on purpose."""
