// SPDX-License-Identifier: MIT
// The NIXL plugin entry points: libplugin_TERN.so (docs/nixl.md).
#include "backend/backend_plugin.h"
#include "tern_backend.h"

namespace {

// Every backend parameter the engine reads, with its default ("": tern's
// own default, or its TERN_* environment variable).
nixl_b_params_t
ternOptions() {
    nixl_b_params_t params;
    params["provider"] = ""; // tern_ctx_attr.provider: efa, verbs, tcp, shm...
    params["fabric"] = "";
    params["domains"] = ""; // rails on several NICs, or "gpu=N"
    params["node"] = "";
    params["rails"] = "";     // endpoints on one domain
    params["hmem"] = "";      // 1: ask the provider for GPU memory (FI_HMEM)
    params["busy_poll"] = ""; // 1: the engine thread never sleeps
    params["hello_timeout_ms"] = "10000";
    return params;
}

using ternPlugin = nixlBackendPluginCreator<nixlTernEngine>;

} // namespace

extern "C" NIXL_PLUGIN_EXPORT nixlBackendPlugin *
nixl_plugin_init() {
    return ternPlugin::create(
        NIXL_PLUGIN_API_VERSION, "TERN", tern_version(), ternOptions(), {DRAM_SEG, VRAM_SEG});
}

extern "C" NIXL_PLUGIN_EXPORT void
nixl_plugin_fini() {}
