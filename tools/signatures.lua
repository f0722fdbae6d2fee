-- tools/signatures.lua: prints doc/signatures.md, the table of op signatures, from
-- lua/torch/signatures.lua:  build/dplua tools/signatures.lua > doc/signatures.md
require 'nn'
io.write(require('torch.signatures').markdown())
