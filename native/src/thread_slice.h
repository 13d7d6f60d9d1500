/* A thread's slice in the fair scheduler (thread_slice.c). */
#ifndef IPUFS_THREAD_SLICE_H
#define IPUFS_THREAD_SLICE_H

long ipufs_thread_slice(long ns);

#endif
