// Package emutest holds test fixtures for the emulated ConnectX: emulated hosts on an
// in-process fabric, contexts opened through package uverbs exactly as a provider opens them
// (ioctl GET_CONTEXT with mlx5 driver data, UAR pages mapped at mlx5's mmap offsets), MRs on
// page-aligned memory, CQs and RC QPs whose rings are package mlx5's ring code over user
// buffers, and a connected QP pair. It drives the device the way libmlx5 does, without the
// provider package (which the emulator must not import).
package emutest
