/*
 * libmlx5-shift-preload.so: loaded with LD_PRELOAD beside libmlx5-shift, for two things
 * libibverbs' plugin loading cannot do.
 *
 * Registration order. Programs that link or dlopen Debian's libmlx5 themselves (perftest has
 * it as DT_NEEDED, NCCL dlopens it before ibv_get_device_list) register mlx5 before
 * libibverbs reads RDMAV_DRIVERS, and the first registered driver that matches a device
 * claims it: mlx5 would claim every ConnectX. This object defines
 * verbs_register_driver_34@@IBVERBS_PRIVATE_34, which the dynamic linker binds ahead of
 * libibverbs' own; the first time another driver registers, it loads libmlx5-shift first
 * (whose constructor registers mlx5-shift), then forwards the registration.
 *
 * Completion channels. libibverbs makes a channel with a write() on the command fd, which
 * needs the kernel: emulated devices have none, and SHIFT must raise events from the backup
 * NIC on the channel too. For contexts of libmlx5-shift, ibv_create_comp_channel and
 * ibv_destroy_comp_channel go to the plugin (which hands its hooks over at load); every
 * other context gets libibverbs' own.
 *
 * The plugin is found at $SHIFT_PLUGIN, else next to this object, else on the library path.
 * Plain C, no Go: it is loaded into every process of the environment.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../abi34.h"

#define PLUGIN_FILE "libmlx5-shift-rdmav34.so"

static struct ibv_comp_channel *(*hook_create)(struct ibv_context *);
static int (*hook_destroy)(struct ibv_comp_channel *);
static int (*hook_owns)(struct ibv_context *);
static pthread_once_t plugin_once = PTHREAD_ONCE_INIT;

/* Called by libmlx5-shift's constructor. */
__attribute__((visibility("default"))) void
shift_preload_set_hooks(struct ibv_comp_channel *(*create)(struct ibv_context *),
			int (*destroy)(struct ibv_comp_channel *), int (*owns)(struct ibv_context *))
{
	hook_create = create;
	hook_destroy = destroy;
	hook_owns = owns;
}

static void load_plugin(void)
{
	char path[PATH_MAX];
	const char *p = getenv("SHIFT_PLUGIN");
	Dl_info self;

	if (!p || !*p) {
		p = PLUGIN_FILE;
		if (dladdr((void *)load_plugin, &self) && self.dli_fname) {
			char dir[PATH_MAX];

			snprintf(dir, sizeof(dir), "%s", self.dli_fname);
			if (snprintf(path, sizeof(path), "%s/%s", dirname(dir), PLUGIN_FILE) < (int)sizeof(path))
				p = path;
		}
	}
	if (!dlopen(p, RTLD_NOW | RTLD_LOCAL))
		fprintf(stderr, "libmlx5-shift-preload: cannot load %s: %s\n", p, dlerror());
}

__attribute__((visibility("default"))) void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
	static void (*real)(const struct verbs_device_ops *);

	if (!real)
		real = (void (*)(const struct verbs_device_ops *))dlvsym(RTLD_NEXT, "verbs_register_driver_34",
									 SHIFT_PRIVATE_ABI);
	if (!real) {
		fprintf(stderr, "libmlx5-shift-preload: libibverbs has no %s verbs_register_driver_34; %s not registered\n",
			SHIFT_PRIVATE_ABI, ops->name);
		return;
	}
	/* Another provider registers: make sure mlx5-shift did first. (The plugin registers
	 * itself straight with libibverbs, not through here.) */
	if (strcmp(ops->name, "mlx5-shift") != 0)
		pthread_once(&plugin_once, load_plugin);
	real(ops);
}

__attribute__((visibility("default"))) struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	static struct ibv_comp_channel *(*real)(struct ibv_context *);

	if (hook_owns && hook_owns(ctx))
		return hook_create(ctx);
	if (!real)
		real = (struct ibv_comp_channel * (*)(struct ibv_context *))
			dlvsym(RTLD_NEXT, "ibv_create_comp_channel", "IBVERBS_1.0");
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	return real(ctx);
}

__attribute__((visibility("default"))) int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	static int (*real)(struct ibv_comp_channel *);

	if (hook_destroy) {
		int r = hook_destroy(ch);

		if (r != -1)
			return r;
	}
	if (!real)
		real = (int (*)(struct ibv_comp_channel *))dlvsym(RTLD_NEXT, "ibv_destroy_comp_channel", "IBVERBS_1.0");
	if (!real)
		return ENOSYS;
	return real(ch);
}
