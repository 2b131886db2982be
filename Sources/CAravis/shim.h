// Aravis 0.8 (libaravis-dev): GigE Vision and USB3 Vision cameras described by GenICam. Its
// errors are GErrors and its objects GObjects; these helpers keep glib's memory rules here.
#ifndef CAPFLEET_CARAVIS_SHIM_H
#define CAPFLEET_CARAVIS_SHIM_H
#include <arv.h>
#include <stdlib.h>
#include <string.h>

// The error's message, copied with malloc for the caller to free, and the error freed; NULL
// when there was none.
static inline char *capfleet_arv_error_message(GError *error) {
    if (error == NULL) return NULL;
    char *message = strdup(error->message != NULL ? error->message : "unknown error");
    g_error_free(error);
    return message;
}

static inline void capfleet_arv_unref(void *object) {
    if (object != NULL) g_object_unref(object);
}

// A string list Aravis allocated (arv_camera_dup_*_as_strings): the array only, not its strings.
static inline void capfleet_arv_free(void *memory) { g_free(memory); }
// A GigE Vision stream's packet counts; zero for other streams (ARV_GV_STREAM is a macro).
static inline void capfleet_arv_gv_stream_statistics(ArvStream *stream, guint64 *resent, guint64 *missing) {
    *resent = 0;
    *missing = 0;
    if (stream != NULL && ARV_IS_GV_STREAM(stream)) arv_gv_stream_get_statistics(ARV_GV_STREAM(stream), resent, missing);
}
#endif
