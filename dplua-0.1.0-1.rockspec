-- luarocks make: builds dplua with its Makefile and installs the torch, nn, optim,
-- torch.data and torch.distributed modules (one C library, torch.so) for Lua 5.4, and the
-- dplua program.  `luarocks make --local` from a checkout; see README.md.
rockspec_format = "3.0"
package = "dplua"
version = "0.1.0-1"
source = {
   url = "git+file:///dplua",   -- `luarocks make` builds the checkout it is run in
}
description = {
   summary = "Neural networks on GPUs and CPUs with a Lua 5.4 front end (Torch7's feel, PyTorch's behaviour)",
   detailed = [[
      An embeddable C library for training neural networks: tensors on the CPU and CUDA,
      autograd, nn, optim, DataLoader, DataParallel and DistributedDataParallel, with the
      Lua modules torch, nn and optim.
   ]],
   license = "MIT",
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
build = {
   type = "make",
   build_target = "all",
   build_variables = {
      CFLAGS = "$(CFLAGS)",
      LUA = "$(LUA)",
   },
   install_target = "install-rock",
   install_variables = {
      LIBDIR = "$(LIBDIR)",
      BINDIR = "$(BINDIR)",
      LUADIR = "$(LUADIR)",
   },
}
