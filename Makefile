# dplua's build.  `make` builds everything into $(BUILD); `make test` installs what is
# missing (Debian packages), builds and runs every spec; `make run` runs the notes' example.
#
#   make CUDA=0        build without the CUDA backend (default: built when nvcc is found)
#   make MPI=0         build without the MPI backend (default: built when mpicc is found)
#   make asan          AddressSanitizer + UBSan build in build-asan/, runs every spec
#   make tsan          ThreadSanitizer build in build-tsan/, runs the threaded embedding hosts
#                      and the DataLoader specs
#   make install PREFIX=/usr/local
#   make env           prints the exports that let stock lua5.4 find an uninstalled build
#   make uninstall PREFIX=/usr/local   removes what make install put there
#   CPPFLAGS, CFLAGS and LDFLAGS from the environment are added (Debian's hardening flags)

VERSION := 0.1.0
SOMAJOR := 0
BUILD   ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
PREFIX  ?= /usr/local
CC      ?= cc
OPT     ?= -O3
SAN     ?=

NVCC_FOUND := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA    ?= $(if $(NVCC_FOUND),1,0)
NVCC    ?= $(or $(NVCC_FOUND),nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
MPICC_FOUND := $(shell command -v mpicc 2>/dev/null)
MPI     ?= $(if $(MPICC_FOUND),1,0)

LUA_CFLAGS := $(shell pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
LUA_LIBS   := $(shell pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4)
LUA        ?= lua5.4

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -fPIC -g $(OPT) -Wall -Wextra -Wno-unused-parameter \
              -fopenmp-simd -fvisibility=hidden $(SAN)
DEFS = -DDPLUA_VERSION='"$(VERSION)"'
ifeq ($(CUDA),1)
DEFS += -DDP_HAVE_CUDA
endif
ifeq ($(MPI),1)
DEFS += -DDP_HAVE_MPI
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
endif
override CFLAGS += $(CFLAGS_BASE) $(CPPFLAGS) $(DEFS) $(MPI_CFLAGS)
LIBS     = -lopenblas $(MPI_LIBS) -lpthread -ldl -lm

ENGINE_SRC := $(sort $(wildcard src/*.c))
INTERP_SRC := lua/dplua.c lua/dplua_complete.c
BIND_SRC   := $(sort $(filter-out $(INTERP_SRC),$(wildcard lua/*.c)))
LUA_FILES  := $(sort $(shell find lua -name '*.lua'))
CU_SRC     := $(sort $(wildcard kernels/*.cu))

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/obj/%.o)
BIND_OBJ   := $(BIND_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/lua_sources.o
ALL_OBJ    := $(ENGINE_OBJ) $(BIND_OBJ)

LIB_A   := $(BUILD)/libdplua.a
LIB_SO  := $(BUILD)/libdplua.so
LUAMOD  := $(BUILD)/lua/torch.so
BIN     := $(BUILD)/dplua
CUDA_SO := $(BUILD)/libdplua_cuda.so
HOSTS   := $(BUILD)/examples/embed/host $(BUILD)/examples/embed/threads $(BUILD)/examples/embed/grad_mode

TARGETS := $(BIN) $(LIB_A) $(LIB_SO) $(LUAMOD) $(BUILD)/dplua.pc $(HOSTS)
ifeq ($(CUDA),1)
TARGETS += $(CUDA_SO)
endif

.PHONY: all deps test-deps install-pkgs install-rock test run asan tsan install uninstall env clean bench check-cuda cuda-emu
all: $(TARGETS)

# ------------------------------------------------------------------ engine and binding
# Everything is compiled with -fvisibility=hidden: the libraries export dplua.h's API and
# the luaopen_* entry points (marked DPLUA_API), nothing else.  (The CUDA backend library
# gets the engine's error reporter from its init call, not by symbol.)
$(BUILD)/obj/src/%.o: src/%.c $(wildcard src/*.h src/*.def kernels/comm.h) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/lua/%.o: lua/%.c $(wildcard lua/*.h src/*.h src/*.def) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LUA_CFLAGS) -c $< -o $@

# the source tree, where tracebacks find the Lua files of an uninstalled build
$(BUILD)/obj/lua/dplua_lib.o: CFLAGS += -DDPLUA_SOURCE_DIR='"$(abspath .)"'

# help()'s index (module torch._help), built from the docs (not conformance.md: a table of
# measurements, whose op names would shadow the reference pages)
HELP_INDEX := $(BUILD)/gen/lua/torch/_help.lua
HELP_PAGES := $(filter-out doc/conformance.md,$(wildcard doc/*.md))
$(HELP_INDEX): tools/helpindex.lua $(HELP_PAGES)
	@mkdir -p $(dir $@)
	$(LUA) tools/helpindex.lua $@ $(HELP_PAGES)

$(BUILD)/gen/lua_sources.c: tools/embed.lua $(LUA_FILES) $(HELP_INDEX)
	@mkdir -p $(dir $@)
	$(LUA) tools/embed.lua $@ $(LUA_FILES) $(HELP_INDEX)

$(BUILD)/obj/gen/lua_sources.o: $(BUILD)/gen/lua_sources.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LUA_CFLAGS) -c $< -o $@

$(LIB_A): $(ALL_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIB_SO): $(ALL_OBJ)
	$(CC) -shared $(SAN) $(LDFLAGS) -o $@ $^ $(LUA_LIBS) $(LIBS) -Wl,-soname,libdplua.so.$(SOMAJOR)
	ln -sf libdplua.so $(BUILD)/libdplua.so.$(SOMAJOR)

# The module stock lua5.4 loads: the same objects, Lua's symbols left to the interpreter.
$(LUAMOD): $(ALL_OBJ)
	@mkdir -p $(BUILD)/lua/torch
	$(CC) -shared $(SAN) $(LDFLAGS) -o $@ $^ $(LIBS)
	$(call link_modules,$(BUILD)/lua)

$(BIN): $(INTERP_SRC:%.c=$(BUILD)/obj/%.o) $(LIB_A)
	$(CC) $(SAN) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB_A) $(LUA_LIBS) -ledit $(LIBS) -Wl,-E

$(BUILD)/examples/embed/%: examples/embed/%.c lua/dplua.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LUA_CFLAGS) $(LDFLAGS) -Ilua -o $@ $< $(LIB_A) $(LUA_LIBS) $(LIBS)

$(BUILD)/dplua.pc: tools/dplua.pc.in
	@mkdir -p $(BUILD)
	$(call write_pc,$@)

# $(call link_modules,DIR): the symlinks in DIR (which holds torch.so) through which stock
# lua5.4 finds luaopen_nn, luaopen_optim, luaopen_torch_data, luaopen_torch_distributed
define link_modules
	ln -sf torch.so $(1)/nn.so
	ln -sf torch.so $(1)/optim.so
	ln -sf ../torch.so $(1)/torch/data.so
	ln -sf ../torch.so $(1)/torch/distributed.so
endef

# $(call write_pc,FILE): dplua.pc for pkg-config, for the libraries under $(PREFIX)
write_pc = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBS@|$(LIBS)|g' -e 's|@VERSION@|$(VERSION)|g' tools/dplua.pc.in > $(1)

# ------------------------------------------------------------------ CUDA backend (run-time loaded)
# A fat binary: machine code for Ampere (sm_80: A100) and Hopper (sm_90: H100, H200), and
# sm_90 PTX that the driver compiles for newer GPUs when the library is first loaded.
NVCCFLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90 -I. -Isrc
CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
# nvcc's resource usage (registers per kernel) goes to a .log beside the object, for the
# emulation's register table (spec/cudaemu/registers.sh); the rest of its output shows.
$(BUILD)/obj/kernels/%.o: kernels/%.cu $(wildcard kernels/*.h kernels/*.cuh src/*.h src/*.def)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) --resource-usage -c $< -o $@ > $(@:.o=.log) 2>&1; rc=$$?; \
	grep -v -e '^ptxas info' -e 'bytes stack frame' $(@:.o=.log) >&2; exit $$rc

$(CUDA_SO): $(CU_OBJ)
	$(NVCC) -shared -Xcompiler -fPIC -o $@ $^ -cudart static -L$(CUDA_HOME)/lib64 -lcublas -lnccl

check-cuda: $(CUDA_SO)

# ------------------------------------------------------------------ CUDA emulation (spec/cudaemu)
# The kernels' source compiled by the host C++ compiler against an emulated CUDA runtime,
# so the CUDA backend's logic runs on any machine: make cuda-emu; spec/cudaemu/run.
EMU ?= build-emu
EMU_OBJ := $(CU_SRC:kernels/%.cu=$(EMU)/kernels/%.o) $(EMU)/emu.o $(EMU)/nccl.o $(EMU)/registers.o
EMU_DEPS := $(wildcard kernels/*.h kernels/*.cuh src/backend.h src/dp.h src/ops.def src/opmath.h src/half.h src/philox.h src/attention.h spec/cudaemu/include/*.h)
EMU_CXXFLAGS = -std=c++17 -O2 -g -fPIC -fvisibility=hidden -U_FORTIFY_SOURCE -Wall -Wno-unused-function -Wno-unknown-pragmas \
               -Ispec/cudaemu/include -Ikernels -I. -Isrc
$(EMU)/kernels/%.cpp: kernels/%.cu spec/cudaemu/launch.sed
	@mkdir -p $(dir $@)
	{ echo '#line 1 "$<"'; sed -E -f spec/cudaemu/launch.sed $<; } > $@
$(EMU)/kernels/%.o: $(EMU)/kernels/%.cpp $(EMU_DEPS)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
$(EMU)/%.o: spec/cudaemu/%.cpp $(EMU_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
# registers per thread of each kernel, from the CUDA build's resource usage: the launch
# check of a block's registers (empty, and saying so, without nvcc)
ifeq ($(CUDA),1)
$(EMU)/registers.cpp: $(CU_OBJ) spec/cudaemu/registers.sh spec/cudaemu/registers_kernel.cuh
	@mkdir -p $(dir $@)
	spec/cudaemu/registers.sh "$(NVCC)" $(CU_OBJ:.o=.log) > $@
else
$(EMU)/registers.cpp: spec/cudaemu/registers.sh
	@mkdir -p $(dir $@)
	spec/cudaemu/registers.sh "" > $@
endif
$(EMU)/registers.o: $(EMU)/registers.cpp
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
$(EMU)/libdplua_cuda.so: $(EMU_OBJ)
	$(CXX) -shared -o $@ $^ -lpthread -lrt
# kernels with the bugs the emulation must catch (spec/cudaemu/run runs it)
$(EMU)/selftest.cpp: spec/cudaemu/selftest.cu spec/cudaemu/launch.sed
	@mkdir -p $(dir $@)
	{ echo '#line 1 "$<"'; sed -E -f spec/cudaemu/launch.sed $<; } > $@
$(EMU)/selftest: $(EMU)/selftest.cpp $(EMU)/emu.o $(EMU)/registers.o $(EMU_DEPS) spec/cudaemu/registers_kernel.cuh
	$(CXX) $(EMU_CXXFLAGS) -Ispec/cudaemu -o $@ $< $(EMU)/emu.o $(EMU)/registers.o -lpthread
# the strided offsets' fast divider (kernels/divider.h) against the division operator, on
# the host (spec/cudaemu/run runs it)
$(EMU)/divider_test: spec/cudaemu/divider_test.cpp kernels/divider.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Ikernels -o $@ $<
# the emulated NCCL between forked ranks (spec/cudaemu/run runs it)
$(EMU)/nccl_test: spec/cudaemu/nccl_test.cpp $(EMU)/emu.o $(EMU)/nccl.o $(EMU)/registers.o $(EMU_DEPS)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< $(EMU)/emu.o $(EMU)/nccl.o $(EMU)/registers.o -lpthread -lrt
cuda-emu: $(EMU)/libdplua_cuda.so $(EMU)/selftest $(EMU)/divider_test $(EMU)/nccl_test

# ------------------------------------------------------------------ set-up, tests, examples
# what building and running need; the specs also need SPEC_PKGS (PyTorch and NumPy are the
# references, busted runs the specs, gnuplot draws the plots checked): make deps installs the
# first, make test-deps both
DEB_PKGS = lua5.4 liblua5.4-dev libopenblas-dev libopenmpi-dev openmpi-bin libedit-dev pkg-config g++
SPEC_PKGS = lua-busted python3-torch python3-numpy gnuplot-nox
deps:
	@$(MAKE) -s install-pkgs PKGS="$(DEB_PKGS)"
test-deps:
	@$(MAKE) -s install-pkgs PKGS="$(DEB_PKGS) $(SPEC_PKGS)"
install-pkgs:
	@missing=$$(for p in $(PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root (apt-get) or install:" $$missing; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

test: test-deps
	$(MAKE) -j2 all $(if $(filter 1,$(CUDA)),cuda-emu)
	BUILD=$(BUILD) EMU=$(EMU) spec/run

run: deps
	$(MAKE) -j2 all
	$(BIN) examples/train.lua

bench: test-deps
	$(MAKE) -j2 all
	BUILD=$(BUILD) bench/run

asan: test-deps
	$(MAKE) -j2 BUILD=$(ASAN_BUILD) CUDA=0 OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" all
	BUILD=$(ASAN_BUILD) ASAN=1 spec/run

# The specs run in the instrumented dplua binary: stock lua5.4 would need libtsan preloaded,
# and the shells that the specs start would inherit it and crash.  A report fails the run.
TSAN_RUN := TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
tsan:
	$(MAKE) -j2 BUILD=$(TSAN_BUILD) CUDA=0 OPT=-O1 SAN="-fsanitize=thread -fno-omit-frame-pointer" all
	$(TSAN_RUN) $(TSAN_BUILD)/examples/embed/threads
	$(TSAN_RUN) $(TSAN_BUILD)/examples/embed/grad_mode
	$(TSAN_RUN) BUILD=$(TSAN_BUILD) LUA="$(abspath $(TSAN_BUILD))/dplua" spec/gpu/specs cpu data data_workers embed

env:
	@echo 'export LUA_CPATH="$(abspath $(BUILD))/lua/?.so;;"'
	@echo 'export PATH="$(abspath $(BUILD)):$$PATH"'

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/lib/lua/5.4/torch $(DESTDIR)$(PREFIX)/share/lua/5.4
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/dplua
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/libdplua.so.$(VERSION)
	ln -sf libdplua.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libdplua.so.$(SOMAJOR)
	ln -sf libdplua.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libdplua.so
	$(if $(filter 1,$(CUDA)),install -m 755 $(CUDA_SO) $(DESTDIR)$(PREFIX)/lib/)
	install -m 644 lua/dplua.h $(DESTDIR)$(PREFIX)/include/
	$(call write_pc,$(DESTDIR)$(PREFIX)/lib/pkgconfig/dplua.pc)
	install -m 755 $(LUAMOD) $(DESTDIR)$(PREFIX)/lib/lua/5.4/torch.so
	$(call link_modules,$(DESTDIR)$(PREFIX)/lib/lua/5.4)
	$(call install_sources,$(DESTDIR)$(PREFIX)/share/lua/5.4/dplua)

# $(call install_sources,DIR): the Lua sources (embedded in the libraries) as files in DIR,
# which tracebacks name (lua/dplua_lib.c finds DIR from where the library lies)
define install_sources
	for f in $(LUA_FILES:lua/%=%); do install -D -m 644 lua/$$f $(1)/$$f; done
	install -D -m 644 $(HELP_INDEX) $(1)/torch/_help.lua
endef

# what `luarocks make` installs (dplua-*.rockspec): the module library and its links into
# the rock's LIBDIR (copies, not links: luarocks moves files one by one), the program into
# its BINDIR (and the CUDA backend beside the program), the Lua sources into LUADIR/dplua
# (which luarocks deploys to share/lua/5.4/dplua)
install-rock: all
	install -d $(LIBDIR)/torch $(BINDIR)
	install -m 755 $(LUAMOD) $(LIBDIR)/torch.so
	for m in nn optim torch/data torch/distributed; do install -m 755 $(LUAMOD) $(LIBDIR)/$$m.so; done
	install -m 755 $(BIN) $(BINDIR)/dplua
	$(if $(filter 1,$(CUDA)),install -m 755 $(CUDA_SO) $(BINDIR)/libdplua_cuda.so)
	$(if $(LUADIR),$(call install_sources,$(LUADIR)/dplua))

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/dplua $(DESTDIR)$(PREFIX)/include/dplua.h \
	  $(DESTDIR)$(PREFIX)/lib/libdplua.a $(DESTDIR)$(PREFIX)/lib/libdplua.so \
	  $(DESTDIR)$(PREFIX)/lib/libdplua.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libdplua.so.$(VERSION) \
	  $(DESTDIR)$(PREFIX)/lib/libdplua_cuda.so $(DESTDIR)$(PREFIX)/lib/pkgconfig/dplua.pc \
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/torch.so $(DESTDIR)$(PREFIX)/lib/lua/5.4/nn.so \
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/optim.so $(DESTDIR)$(PREFIX)/lib/lua/5.4/torch/data.so \
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/torch/distributed.so
	-rmdir $(DESTDIR)$(PREFIX)/lib/lua/5.4/torch 2>/dev/null
	rm -rf $(DESTDIR)$(PREFIX)/share/lua/5.4/dplua

# every build folder: build/, build-asan/, build-emu/, any BUILD= or EMU= given, and the
# build-*/ folders of spec/gpu/bundle and bench (BUILD=build-bench)
clean:
	rm -rf $(sort build $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(EMU)) build-*/

# the differential fuzzer against PyTorch (tools/fuzz): make fuzz SECONDS=60 [SEED=1], basic
# programs and the op families (tools/fuzz/families.py) in turn;
# failing programs are left as reproducers under $(BUILD)/fuzz-findings
SECONDS ?= 60
SEED ?= 1
fuzz: all
	BUILD=$(BUILD) tools/fuzz/fuzz --seed $(SEED) --seconds $(SECONDS)
.PHONY: fuzz

# dplua against PyTorch's own op and module databases (tools/conformance; about a minute and
# a half): prints the table op by op and module by module, writes doc/conformance.md and
# $(BUILD)/conformance/findings.json.
# Not part of `make test` (spec/conformance_spec.lua runs a subset of it there).
SAMPLES ?= 5
conformance: all
	BUILD=$(BUILD) tools/conformance/conformance --samples $(SAMPLES) --doc doc/conformance.md
.PHONY: conformance
