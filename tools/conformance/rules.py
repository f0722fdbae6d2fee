"""How a PyTorch call from the op database is spelled in dplua: the one table of rules.

gen.py names every argument of a sample (from the op's schema, or from the Python
signature of a Python function such as nn.functional's) and then translates each value
by the kind its name has here:

  dim      a dimension, or a list of them: d >= 0 becomes d + 1, negative ones stay
  dimlist  the same, but only for a list (an int there is a count, as tensordot's dims)
  index    an index: an int, or an int64 tensor of indices, d >= 0 becomes d + 1
  plain    passed as it is

Everything else follows from the value: a tensor is an input of the sample, a tuple or a
list a Lua table, a dtype its name ('float32'), None nil, and keyword arguments go into an
options table in last position.  An op is called as torch.NAME(...) when PyTorch has the
function (nn.functional.X as torch.nn.functional.X, linalg.X as torch.linalg.X), else as
the method t:NAME(...).

RULES holds what differs per op, keyed by the op's name (the OpInfo name, or with its
variant: 'max.reduction_with_dim'; the longer key wins):

  untranslatable  why the op's samples cannot be written in dplua
  lua             the dplua name to call instead (a rename): 'torch.X', 'method:X' or
                  'attr:X' (a field, as t.T)
  names           the names of the positional arguments, where no schema names them
  args            {argument name: kind}, added to (or overriding) ARG_KINDS
  order           for an OpInfo that calls torch.NAME through a function of its own with
                  the arguments in another order: the positions (0-based) of the
                  sample's first values in torch.NAME's call
  index_out       the positions (0-based) of the outputs that are indices (PyTorch counts
                  them from 0, dplua from 1); 'all' for every output
  index_out_if    (option, positions): index outputs that are there only when the option is true
  shape_only      the positions (0-based) of outputs compared by dtype and shape only
  ties            the index outputs of an input with equal elements are compared by shape
                  only (PyTorch leaves unspecified which of the equal elements is taken)
  view            True for ops whose result PyTorch documents as a view of the input (it
                  must alias; every other op's result must not), False to skip the alias
                  check where PyTorch's own answer depends on the input's strides
  random          True: the values are random draws (only dtype and shape are compared)
  no_grad         why gradients are not compared

The module part (moduledb.py, PyTorch's module_db) is keyed here by the ModuleInfo's name
('nn.Linear', 'ao.nn.quantized.MaxPool2d').  A module is made as nn.NAME (NAME: the class
of the ModuleInfo) with the constructor's arguments spelled as a call's: a positional
argument stays positional, a keyword argument for a parameter that has no default in
PyTorch's signature (MultiheadAttention(embed_dim=3, num_heads=3)) goes to its position,
every other keyword argument into the options table in last position (a None one is left
out), a function argument (activation=F.gelu) is dplua's nn.functional.NAME; the forward's
arguments the same way.  Its rules:

  untranslatable  why the module's inputs cannot be written in dplua
  lua             the dplua constructor to call instead of nn.NAME
  args            {constructor argument name: kind} (ARG_KINDS apply too)
  forward_args    {forward argument name: kind}: 'index' for tensors of class indices
  index_out       the positions (0-based, in the forward's outputs flattened in order)
                  of outputs that are indices
  required        the names of the constructor's parameters without a default, in order,
                  for a class whose __init__ is (*args, **kwargs)
"""

# The kinds of argument names, for every op.
ARG_KINDS = {
    'dim': 'dim', 'dims': 'dim', 'dim0': 'dim', 'dim1': 'dim', 'dim2': 'dim',
    'start_dim': 'dim', 'end_dim': 'dim', 'source': 'dim', 'destination': 'dim',
    'dimension': 'dim', 'axis': 'dim', 'axis0': 'dim', 'axis1': 'dim',
}

# Index tensors (their values are 1-based in dplua), shared by the ops that take them.
_INDEX = {'index': 'index'}

RULES = {
    # ---- index tensors and index numbers: 1-based in dplua
    'gather': {'args': _INDEX},
    'scatter': {'args': _INDEX},
    'scatter_add': {'args': _INDEX},
    'scatter_reduce': {'args': _INDEX},
    'index_select': {'args': _INDEX},
    'index_add': {'args': _INDEX},
    'index_copy': {'args': _INDEX},
    'index_fill': {'args': _INDEX},
    'index_reduce': {'args': _INDEX},
    'index_put': {'args': {'indices': 'index'}},
    'take': {'args': _INDEX},
    'put': {'args': _INDEX},
    'take_along_dim': {'args': {'indices': 'index'}},
    'select': {'args': _INDEX, 'view': True},
    'select_scatter': {'args': _INDEX},
    'narrow': {'args': {'start': 'index'}, 'view': True},
    'narrow_copy': {'args': {'start': 'index'}},
    'nn.functional.embedding': {'args': {'input': 'index', 'padding_idx': 'index'}, 'order': [1, 0]},
    'special.polygamma': {'order': [1, 0]},
    'einsum': {'order': [1, 0]},
    'polygamma': {'names': ['self', 'n']},
    'nn.functional.one_hot': {'args': {'input': 'index', 'tensor': 'index', 'self': 'index'}},
    'nn.functional.nll_loss': {'args': {'target': 'index', 'ignore_index': 'index'}},
    'nn.functional.cross_entropy': {
        'untranslatable': 'its target is either class indices or probabilities, told apart by dtype only'},
    'nn.functional.multi_margin_loss': {'args': {'target': 'index'}},
    'nn.functional.multilabel_margin_loss': {'args': {'target': 'index'}},
    'tensordot': {'args': {'dims': 'dimlist'}},
    'tensor_split': {'args': {'indices_or_sections': 'plain', 'indices': 'plain', 'sections': 'plain',
                              'tensor_indices_or_sections': 'plain'}},

    # ---- outputs that are indices
    'argmax': {'index_out': 'all'},
    'argmin': {'index_out': 'all'},
    'argwhere': {'index_out': 'all'},
    'nonzero': {'index_out': 'all'},
    'searchsorted': {'index_out': 'all'},
    'bucketize': {'index_out': 'all'},
    'triu_indices': {'index_out': 'all'},
    'tril_indices': {'index_out': 'all'},
    'max.reduction_with_dim': {'index_out': [1]},
    'min.reduction_with_dim': {'index_out': [1]},
    'sort': {'index_out': [1], 'ties': True},
    'argsort': {'index_out': 'all', 'ties': True},
    'topk': {'index_out': [1], 'ties': True},
    'kthvalue': {'index_out': [1], 'ties': True},
    'median': {'index_out': [1], 'ties': True},
    'nanmedian': {'index_out': [1], 'ties': True},
    'nn.functional.max_pool1d': {'index_out': [1]},
    'nn.functional.max_pool2d': {'index_out': [1]},
    'nn.functional.max_pool3d': {'index_out': [1]},
    'nn.functional.adaptive_max_pool1d': {'index_out': [1]},
    'nn.functional.adaptive_max_pool2d': {'index_out': [1]},
    'nn.functional.adaptive_max_pool3d': {'index_out': [1]},
    'mode': {'index_out': [1]},
    'cummax': {'index_out': [1]},
    'cummin': {'index_out': [1]},
    'unique': {'index_out_if': ('return_inverse', [1])},
    'unique_consecutive': {'index_out_if': ('return_inverse', [1])},
    # eigenvectors and singular vectors: each is only defined up to its sign
    'linalg.eigh': {'shape_only': [1]},
    'linalg.svd': {'shape_only': [0, 2]},
    'svd': {'shape_only': [0, 2]},

    # ---- views (PyTorch documents these as views of their input)
    'view': {'view': True}, 'view_as': {'view': True}, 'expand': {'view': True},
    'expand_as': {'view': True}, 'permute': {'view': True}, 'transpose': {'view': True},
    't': {'view': True}, 'squeeze': {'view': True}, 'unsqueeze': {'view': True},
    'diagonal': {'view': True}, 'movedim': {'view': True}, 'unflatten': {'view': True},
    'split': {'view': True}, 'split_with_sizes': {'view': True}, 'chunk': {'view': True},
    'unbind': {'view': True}, 'unfold': {'view': True},
    'as_strided': {'view': True}, 'hsplit': {'view': True}, 'vsplit': {'view': True},
    'dsplit': {'view': True}, 'broadcast_to': {'view': True}, 'T': {'view': True, 'lua': 'attr:T'},
    'mT': {'view': True, 'lua': 'attr:mT'}, 'H': {'lua': 'attr:H'}, 'mH': {'lua': 'attr:mH'},
    # these return their input or a view of it only when its strides allow; the inputs
    # here are contiguous, so PyTorch's own answer is what is checked
    'reshape': {}, 'reshape_as': {}, 'flatten': {}, 'ravel': {}, 'contiguous': {'lua': 'method:contiguous'},

    # ---- random draws: dtype and shape only
    'uniform': {'random': True}, 'normal': {'random': True}, 'normal.number_mean': {'random': True},
    'bernoulli': {'random': True}, 'multinomial': {'random': True}, 'randn': {'random': True},
    'randn_like': {'random': True}, 'rand_like': {'random': True}, 'randint_like': {'random': True},
    'nn.functional.dropout': {'random': True}, 'nn.functional.dropout2d': {'random': True},
    'nn.functional.dropout3d': {'random': True}, 'nn.functional.rrelu': {'random': True},
    'nn.functional.feature_alpha_dropout.with_train': {'random': True},
    'nn.functional.fractional_max_pool2d': {'random': True},
    'nn.functional.fractional_max_pool3d': {'random': True},
    'empty': {'random': True}, 'empty_like': {'random': True}, 'new_empty': {'random': True},
    'svd_lowrank': {'random': True}, 'pca_lowrank': {'random': True},

    # ---- renames: PyTorch's spelling that dplua has under another name
    'clone': {'lua': 'method:clone'},
    '__radd__': {'lua': 'op:+'}, '__rsub__': {'lua': 'op:-'}, '__rmul__': {'lua': 'op:*'},
    '__rdiv__': {'lua': 'op:/'},
    '__rpow__': {'lua': 'op:^', 'no_grad': 'PyTorch copies the tensor operand with torch.tensor(), detaching it'},
    '__rmod__': {'untranslatable': "Lua's % is not a tensor operator in dplua's docs"},
    '__rmatmul__': {'untranslatable': 'Lua has no matrix product operator'},
    '__rand__': {'untranslatable': 'Lua has no bitwise operators on tensors'},
    '__ror__': {'untranslatable': 'Lua has no bitwise operators on tensors'},
    '__rxor__': {'untranslatable': 'Lua has no bitwise operators on tensors'},
    'repeat': {'lua': 'method:repeat'},

    # ---- what cannot be written in dplua
    '__getitem__': {'untranslatable': "Python's slice objects (t[1:3, ...]) have no direct Lua value"},
    'slice': {'untranslatable': 'an aten op without a Python function'},
    'as_strided_scatter': {'untranslatable': 'strides are storage layout, not part of the contract'},
    'new_empty_strided': {'untranslatable': 'strides are storage layout, not part of the contract'},
    'sparse.sampled_addmm': {'untranslatable': 'sparse tensors'},
    'to_sparse': {'untranslatable': 'sparse tensors'},
    'view_as_real': {'untranslatable': 'complex dtypes'},
    'view_as_complex': {'untranslatable': 'complex dtypes'},
    'complex': {'untranslatable': 'complex dtypes'},
    'polar': {'untranslatable': 'complex dtypes'},
    'chalf': {'untranslatable': 'complex dtypes'},
    'resize_': {'untranslatable': 'PyTorch keeps the old storage contents, dplua zeroes new elements by design'},
    'resize_as_': {'untranslatable': 'PyTorch keeps the old storage contents, dplua zeroes new elements by design'},
    'jiterator_unary': {'untranslatable': 'CUDA-only code generation'},
    'jiterator_binary': {'untranslatable': 'CUDA-only code generation'},
    'jiterator_4inputs_with_extra_args': {'untranslatable': 'CUDA-only code generation'},
    'jiterator_binary_return_by_ref': {'untranslatable': 'CUDA-only code generation'},
    'jiterator_2inputs_2outputs': {'untranslatable': 'CUDA-only code generation'},
    'segment_reduce.lengths': {'untranslatable': 'an aten op without a Python function'},
    'segment_reduce.offsets': {'untranslatable': 'an aten op without a Python function'},
    'native_layer_norm': {'untranslatable': 'an aten op without a Python function'},
    'native_batch_norm': {'untranslatable': 'an aten op without a Python function'},
    'stft': {'untranslatable': 'complex dtypes'},
    'istft': {'untranslatable': 'complex dtypes'},

    # ---- modules (common_modules.module_db): class indices are 1-based in dplua
    'nn.Embedding': {'args': {'padding_idx': 'index'}, 'forward_args': {'input': 'index'}},
    'nn.NLLLoss': {'args': {'ignore_index': 'index'}, 'forward_args': {'target': 'index'}},
    'nn.CrossEntropyLoss': {'args': {'ignore_index': 'index'}, 'forward_args': {'target': 'index'}},
    'ao.nn.quantized.MaxPool2d': {'index_out': [1]},      # the class is nn.MaxPool2d itself
    # RNNBase.__init__(mode, input_size, hidden_size, ...) behind (*args, **kwargs)
    'nn.RNN': {'required': ['input_size', 'hidden_size']},
    'nn.GRU': {'required': ['input_size', 'hidden_size']},
    'nn.LSTM': {'required': ['input_size', 'hidden_size']},
}
