/*
 * Loading and registration: the constructor that registers mlx5-shift with libibverbs, the
 * device match table, and the device and context allocation ops. Nothing here calls Go
 * until a context is opened: libibverbs may load the plugin into processes that never use
 * it, and a constructor must not wait for the Go runtime.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/ib_user_ioctl_verbs.h>

#include "plugin.h"
#include "_cgo_export.h"

struct shift_private_abi shift_abi;
volatile int shift_forked;

#define MELLANOX 0x15b3
#define HCA(id) { .driver_data = (void *)SHIFT_MODE_HW, .vendor = MELLANOX, .device = (id), .kind = SHIFT_MATCH_PCI }

/* Emulated devices carry a shift:emu modalias, or a ConnectX identity plus the marker file
 * device/shift_emu (so that programs that link libmlx5 see a ConnectX; shift_alloc_device).
 * Real devices: the mlx5 driver id (netlink discovery) and the ConnectX PCI ids, as libmlx5
 * v44 lists them. */
static const struct verbs_match_ent shift_match_table[] = {
	{ .driver_data = (void *)SHIFT_MODE_EMU, .u.modalias = "shift:emu*", .kind = SHIFT_MATCH_MODALIAS },
	{ .driver_data = (void *)SHIFT_MODE_HW, .u.driver_id = RDMA_DRIVER_MLX5, .kind = SHIFT_MATCH_DRIVER_ID },
	HCA(0x1011), HCA(0x1012), HCA(0x1013), HCA(0x1014), HCA(0x1015), HCA(0x1016), HCA(0x1017),
	HCA(0x1018), HCA(0x1019), HCA(0x101a), HCA(0x101b), HCA(0x101c), HCA(0x101d), HCA(0x101e),
	HCA(0x101f), HCA(0x1021), HCA(0x1023), HCA(0xa2d2), HCA(0xa2d3), HCA(0xa2d6), HCA(0xa2dc),
	HCA(0xa2df),
	{ 0 },
};

static int has_emu_marker(const struct verbs_sysfs_dev *sd)
{
	char path[IBV_SYSFS_PATH_MAX + 32];

	if (snprintf(path, sizeof(path), "%s/device/shift_emu", sd->ibdev_path) >= (int)sizeof(path))
		return 0;
	return access(path, F_OK) == 0;
}

static struct verbs_device *shift_alloc_device(struct verbs_sysfs_dev *sd)
{
	struct shift_device *dev = calloc(1, sizeof(*dev));

	if (!dev)
		return NULL;
	dev->mode = sd->match ? (int)(intptr_t)sd->match->driver_data : SHIFT_MODE_HW;
	if (has_emu_marker(sd))
		dev->mode = SHIFT_MODE_EMU;
	return &dev->vdev;
}

static void shift_uninit_device(struct verbs_device *vdev)
{
	free((struct shift_device *)vdev);
}

/* The Go runtime cannot share a process with another one (golang/go#18976, #65050): an
 * object with a Go build-id note other than this plugin means one is there already. */
struct go_scan {
	const char *self;
	const char *found;
};

static int scan_go_note(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct go_scan *s = arg;
	(void)size;

	if (s->found || (info->dlpi_name && s->self && strcmp(info->dlpi_name, s->self) == 0))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof(*nh);
			size_t nsz = (nh->n_namesz + 3) & ~3u, dsz = (nh->n_descsz + 3) & ~3u;

			/* Go's linker writes owner "Go", type 4 (ELF_NOTE_GOBUILDID_TAG). */
			if (nh->n_namesz == 3 && nh->n_type == 4 && memcmp(name, "Go", 3) == 0) {
				s->found = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "the program";
				return 1;
			}
			p = name + nsz + dsz;
		}
	}
	return 0;
}

static const char *other_go_runtime(void)
{
	static struct go_scan s;
	Dl_info self;

	if (s.found)
		return s.found;
	if (dladdr((void *)scan_go_note, &self))
		s.self = self.dli_fname;
	dl_iterate_phdr(scan_go_note, &s);
	return s.found;
}

static struct verbs_context *shift_alloc_context(struct ibv_device *ibdev, int cmd_fd, void *private_data)
{
	struct shift_device *dev = (struct shift_device *)ibdev; /* vdev.device is first */
	struct shift_context *ctx;
	const char *other;
	int err;

	(void)private_data;
	if (shift_forked) {
		close(cmd_fd);
		errno = EPERM;
		return NULL;
	}
	other = other_go_runtime();
	if (other) {
		fprintf(stderr, "libmlx5-shift: %s: refusing to open: %s already runs a Go runtime, and two "
			"cannot share a process; a Go program uses the Go packages provider and failover instead\n",
			ibdev->name, other);
		close(cmd_fd);
		errno = EBUSY;
		return NULL;
	}
	ctx = shift_abi.init_and_alloc_context(ibdev, cmd_fd, sizeof(*ctx), &((struct shift_context *)0)->vctx,
					       RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL; /* errno set; libibverbs closed cmd_fd */
	shift_abi.set_ops(&ctx->vctx, &shift_ctx_ops);
	ctx->mode = dev->mode;
	ctx->fast = shift_fast_ctx_new();
	if (!ctx->fast) {
		shift_abi.uninit_context(&ctx->vctx);
		free(ctx);
		errno = ENOMEM;
		return NULL;
	}
	err = shiftGoOpenContext(ctx, dev->vdev.sysfs->ibdev_name, dev->vdev.sysfs->sysfs_name, cmd_fd, dev->mode);
	if (err) {
		shift_fast_ctx_free(ctx->fast);
		shift_abi.uninit_context(&ctx->vctx);
		free(ctx);
		errno = err;
		return NULL;
	}
	return &ctx->vctx;
}

void shift_free_context(struct ibv_context *ibctx)
{
	struct shift_context *ctx = to_sctx(ibctx);

	if (!shift_forked)
		shiftGoCloseContext(ctx);
	/* Go closed the async descriptor it owns; libibverbs closes the command fd. */
	ctx->vctx.context.async_fd = -1;
	shift_fast_ctx_free(ctx->fast);
	shift_abi.uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_device_ops shift_dev_ops = {
	.name = "mlx5-shift",
	.match_min_abi_version = 1, /* the mlx5_ib uverbs driver ABI (MLX5_UVERBS_*_ABI_VERSION) */
	.match_max_abi_version = 1,
	.match_table = shift_match_table,
	.alloc_device = shift_alloc_device,
	.uninit_device = shift_uninit_device,
	.alloc_context = shift_alloc_context,
};

int shift_is_plugin_context(struct ibv_context *ctx)
{
	return ctx && ((struct verbs_device *)ctx->device)->ops == &shift_dev_ops;
}

static void shift_atfork_child(void)
{
	/* The child has no Go runtime: every op now fails instead of calling into Go. */
	shift_forked = 1;
}

/* The preload object (libmlx5-shift-preload.so), when present, routes the completion
 * channels of the plugin's contexts here. */
typedef void (*shift_preload_hooks_fn)(struct ibv_comp_channel *(*create)(struct ibv_context *),
				       int (*destroy)(struct ibv_comp_channel *),
				       int (*owns)(struct ibv_context *));

__attribute__((constructor)) static void shift_register(void)
{
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	shift_preload_hooks_fn hooks;

	if (!lib)
		return; /* not loaded by libibverbs (a test binary of the plugin): nothing to do */
	shift_abi.register_driver = dlvsym(lib, "verbs_register_driver_34", SHIFT_PRIVATE_ABI);
	shift_abi.init_and_alloc_context = dlvsym(lib, "_verbs_init_and_alloc_context", SHIFT_PRIVATE_ABI);
	shift_abi.uninit_context = dlvsym(lib, "verbs_uninit_context", SHIFT_PRIVATE_ABI);
	shift_abi.set_ops = dlvsym(lib, "verbs_set_ops", SHIFT_PRIVATE_ABI);
	shift_abi.init_cq = dlvsym(lib, "verbs_init_cq", SHIFT_PRIVATE_ABI);
	dlclose(lib); /* NOLOAD: drops only the reference just taken */
	if (!shift_abi.register_driver || !shift_abi.init_and_alloc_context || !shift_abi.uninit_context ||
	    !shift_abi.set_ops || !shift_abi.init_cq) {
		fprintf(stderr, "libmlx5-shift: this libibverbs does not offer the %s provider ABI "
			"(rdma-core v34 to v56), which the plugin is built for; not registering\n", SHIFT_PRIVATE_ABI);
		return;
	}
	pthread_atfork(NULL, NULL, shift_atfork_child);
	hooks = (shift_preload_hooks_fn)dlsym(RTLD_DEFAULT, "shift_preload_set_hooks");
	if (hooks)
		hooks(shift_plugin_create_comp_channel, shift_plugin_destroy_comp_channel, shift_is_plugin_context);
	shift_abi.register_driver(&shift_dev_ops);
}
