// The C side of KeyValueStore: the three callbacks PJRT_Client_Create takes.
// Internal to the PJRT layer (pjrt.cc) and its tests, which call the function
// pointers exactly as a plugin does.
#pragma once

#include "pjrt/kv_store.h"
#include "pjrt_c_api.h"

namespace ttpu::pjrt {

// Points args->kv_get_callback, kv_put_callback, kv_try_get_callback and their
// user args at `store`, which must outlive every use of them (Client keeps it
// alive as long as the PJRT client). A null store clears them.
void set_kv_callbacks(PJRT_Client_Create_Args* args, KeyValueStore* store);

}  // namespace ttpu::pjrt
