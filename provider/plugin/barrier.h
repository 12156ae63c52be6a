/* The barriers of rdma-core's util/udma_barrier.h the C data paths need (fast.c, spost.c). */
#ifndef SHIFT_BARRIER_H
#define SHIFT_BARRIER_H

/* x86-64 keeps stores in program order: udma_to_device_barrier is a compiler barrier;
 * mmio_wc_start and mmio_flush_writes are sfence; udma_from_device_barrier is lfence. */
#if defined(__x86_64__)
#define to_device_barrier() asm volatile("" ::: "memory")
#define from_device_barrier() asm volatile("lfence" ::: "memory")
#define flush_writes() asm volatile("sfence" ::: "memory")
#elif defined(__aarch64__)
#define to_device_barrier() asm volatile("dmb oshst" ::: "memory")
#define from_device_barrier() asm volatile("dmb oshld" ::: "memory")
#define flush_writes() asm volatile("dsb st" ::: "memory")
#else
#error "libmlx5-shift's C data path needs its barriers for this architecture"
#endif

#endif
