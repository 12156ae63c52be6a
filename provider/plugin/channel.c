/*
 * Completion channels the plugin makes itself, for the preload object's
 * ibv_create_comp_channel: on emulated devices there is no kernel to make one, and in SHIFT
 * mode the channel must also carry the events SHIFT raises from the backup NIC. The channel's
 * fd carries the same 8-byte records a kernel channel does, so libibverbs' ibv_get_cq_event
 * reads it unchanged.
 */
#include <errno.h>
#include <stdlib.h>

#include "plugin.h"
#include "_cgo_export.h"

struct ibv_comp_channel *shift_plugin_create_comp_channel(struct ibv_context *ctx)
{
	struct shift_comp_channel *ch;
	int err;

	if (shift_forked) {
		errno = EPERM;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	err = shiftGoCreateCompChannel(to_sctx(ctx), ch);
	if (err) {
		free(ch);
		errno = err;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.refcnt = 0;
	return &ch->ch;
}

/* Returns -1 when ich is not one of the plugin's channels (the preload then hands it to
 * libibverbs), else 0 or an errno. */
int shift_plugin_destroy_comp_channel(struct ibv_comp_channel *ich)
{
	struct shift_comp_channel *ch = (struct shift_comp_channel *)ich;
	int err;

	if (!shift_is_plugin_context(ich->context) || !shiftGoIsPluginChannel(ch))
		return -1;
	if (ich->refcnt)
		return EBUSY; /* CQs still bound to it, as libibverbs refuses */
	if (shift_forked)
		return EPERM;
	err = shiftGoDestroyCompChannel(ch);
	if (!err)
		free(ch);
	return err;
}
