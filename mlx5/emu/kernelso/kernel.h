/*
 * The C side of the emulated kernel library: the interposed calls hand emulated descriptors
 * and mappings to the Go side through the exports declared in _cgo_export.h.
 */
#ifndef SHIFT_EMU_KERNEL_H
#define SHIFT_EMU_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* What the Go side answers for a path or descriptor that is not an emulated device's. */
#define SHIFT_EMU_NOT_OURS (-100000)

/* shift_emu_fd_set marks fd as an emulated command descriptor (1) or not (0). */
void shift_emu_fd_set(int fd, int on);

#endif
