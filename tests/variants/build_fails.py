"""Its first call fails the way a torch.utils.cpp_extension.load_inline build fails (the same exception type and
wording, without spending minutes in a real C++ compile): the run is `failed` with a compile error."""

import torch


def custom_kernel(data: torch.Tensor):
    raise RuntimeError("Error building extension 'kb_ext': c++ main.cpp -o main.o\nmain.cpp:1:9: error: expected")
