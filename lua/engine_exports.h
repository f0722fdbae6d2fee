/* engine_exports.h: the one engine function that stays exported besides dplua.h's API.
 * The CUDA backend library (kernels/backend.cu) still looks dp_error up with dlsym to
 * report its failures; until the engine hands it over when it loads the backend, the
 * Makefile force-includes this declaration into src/core.c, so that dp_error alone keeps
 * default visibility under -fvisibility=hidden. */
#ifndef DPLUA_ENGINE_EXPORTS_H
#define DPLUA_ENGINE_EXPORTS_H

__attribute__((visibility("default"))) int dp_error(const char *fmt, ...);

#endif
