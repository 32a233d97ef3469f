/*
 * types.h: the plain C data types that core/ (and gpu/) share with the C API.
 *
 * C-compatible (plain enums and structs, extern "C"), so that capi's
 * genie/genie.h includes this header and every user of genie.h sees the
 * same names, while core/ itself never includes the C API.  Nothing here
 * has behaviour: the functions are declared in genie/genie.h.
 */
#ifndef GENIE_TYPES_H
#define GENIE_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum genie_status
{
	GENIE_OK = 0,
	GENIE_INVALID_ARGUMENT,		/* the caller's input is wrong */
	GENIE_OUT_OF_MEMORY,		/* host memory */
	GENIE_DEVICE_OUT_OF_MEMORY, /* device memory: callers may fall back */
	GENIE_DEVICE_UNAVAILABLE,	/* no usable GPU (no driver, no device, built without CUDA) */
	GENIE_DEVICE_ERROR,			/* a CUDA call or kernel failed */
	GENIE_INTERNAL_ERROR,		/* a broken invariant: a bug */
	GENIE_CANCELLED				/* the caller's cancel callback asked to stop */
} genie_status;

typedef enum genie_device_kind
{
	GENIE_DEVICE_CPU = 0,
	GENIE_DEVICE_GPU = 1
} genie_device_kind;

typedef struct genie_device_info
{
	genie_device_kind kind;
	int			ordinal;		/* CUDA device number; 0 for the CPU */
	char		name[256];
	uint64_t	memory_bytes;	/* total device memory; host RAM for the CPU */
	uint64_t	free_memory_bytes;
	int			compute_major;	/* compute capability; 0 for the CPU */
	int			compute_minor;
	int			processors;		/* multiprocessors, or CPU cores */
	int			usable;			/* 1 when the engine can run on it */
	char		note[256];		/* why it is not usable, or "" */
} genie_device_info;

/*
 * A batch of queries in CSR form.  Query q owns items
 * [query_offsets[q], query_offsets[q+1]); item i owns keyword ranges
 * [item_offsets[i], item_offsets[i+1]) of ranges_lo/ranges_hi (inclusive
 * bounds) and has weight item_weights[i] >= 1 (NULL: all weights 1).
 * score(Q, O) = sum over items of weight * |item keywords present in O|,
 * where an item's keywords are the union of its ranges.
 */
typedef struct genie_query_batch
{
	int32_t		n_queries;
	const int64_t *query_offsets;	/* n_queries + 1 */
	const int64_t *item_offsets;	/* n_items + 1, n_items = query_offsets[n_queries] */
	const int32_t *item_weights;	/* n_items, or NULL */
	const int32_t *ranges_lo;		/* n_ranges = item_offsets[n_items] */
	const int32_t *ranges_hi;
} genie_query_batch;

typedef enum genie_engine_kind
{
	GENIE_ENGINE_CPU = 0,		/* multi-threaded CPU engine */
	GENIE_ENGINE_GPU = 1,		/* CUDA c-PQ engine; fails when no GPU is usable */
	GENIE_ENGINE_AUTO = 2,		/* the GPU when usable, else the CPU */
	GENIE_ENGINE_CPU_REFERENCE = 3	/* the simple oracle */
} genie_engine_kind;

#ifdef __cplusplus
}
#endif

#endif							/* GENIE_TYPES_H */
