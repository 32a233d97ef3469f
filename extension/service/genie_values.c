/*-------------------------------------------------------------------------
 *
 * genie_values.c
 *	  Stored values of every kind (genie_values.h): their wire layout,
 *	  their sets and scans through the C API, and a scan's rows.  Every
 *	  place where strings, vectors and codes differ is in this file; the
 *	  backends' search (search/genie_search_values.c), their cache
 *	  (search/genie_cache_values.c), the service client and the service's
 *	  worker (worker/genie_worker_values.c) are written once for all.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "service/genie_values.h"

/* ---- the wire layout ---- */

/* The bytes of one row of a batch of vectors or codes. */
static Size
row_bytes(GenieValuesKind kind, int32 dim)
{
	if (kind == GENIE_VALUES_CODES)
		return sizeof(uint64) * (Size) genie_code_words(dim);
	return sizeof(float) * (Size) dim;
}

/* A batch of vectors' or codes' rows. */
static const char *
batch_rows(const GenieValueBatch *batch)
{
	return batch->kind == GENIE_VALUES_CODES ? (const char *) batch->codes
		: (const char *) batch->vectors;
}

/* Points a batch of vectors or codes at rows. */
static void
set_batch_rows(GenieValueBatch *batch, const char *rows)
{
	if (batch->kind == GENIE_VALUES_CODES)
		batch->codes = (const uint64 *) rows;
	else
		batch->vectors = (const float *) rows;
}

Size
genie_value_batch_bytes(const GenieValueBatch *batch, int32 first, int32 n)
{
	if (batch->kind == GENIE_VALUES_STRINGS)
		return sizeof(int64) * ((Size) n + 1) +
			(Size) (batch->text_offsets[first + n] - batch->text_offsets[first]);
	return row_bytes(batch->kind, batch->dim) * (Size) n;
}

void
genie_value_batch_write(const GenieValueBatch *batch, int32 first, int32 n, char *dst)
{
	if (batch->kind == GENIE_VALUES_STRINGS)
	{
		int64		text0 = batch->text_offsets[first];
		int64	   *offsets = (int64 *) dst;

		for (int32 i = 0; i <= n; i++)
			offsets[i] = batch->text_offsets[first + i] - text0;
		memcpy(dst + sizeof(int64) * ((Size) n + 1), batch->text + text0,
			   batch->text_offsets[first + n] - text0);
	}
	else
	{
		Size		row = row_bytes(batch->kind, batch->dim);

		memcpy(dst, batch_rows(batch) + (Size) first * row, row * (Size) n);
	}
}

bool
genie_value_batch_read(GenieValuesKind kind, int32 n, int32 dim, const char *src, Size size,
					   GenieValueBatch *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = kind;
	out->n = n;
	if (n < 0)
		return false;
	if (kind == GENIE_VALUES_STRINGS)
	{
		Size		head = sizeof(int64) * ((Size) n + 1);
		const int64 *offsets = (const int64 *) src;

		if (size < head || offsets[0] != 0 || offsets[n] < 0 || (Size) offsets[n] != size - head)
			return false;
		/* the C API reads each string's bytes: they must lie inside the text */
		for (int32 i = 0; i < n; i++)
			if (offsets[i + 1] < offsets[i])
				return false;
		out->text_offsets = offsets;
		out->text = src + head;
		return true;
	}
	if (dim < 1 || (kind == GENIE_VALUES_CODES && dim > GENIE_MAX_CODE_BITS) ||
		size != row_bytes(kind, dim) * (Size) n)
		return false;
	set_batch_rows(out, src);
	out->dim = dim;
	return true;
}

void
genie_value_batch_select(const GenieValueBatch *all, const int *which, int n, GenieValueBatch *out)
{
	*out = *all;
	out->n = n;
	if (all->kind == GENIE_VALUES_STRINGS)
	{
		int64	   *offsets = palloc(sizeof(int64) * ((Size) n + 1));
		Size		bytes = 0;
		char	   *text;

		for (int i = 0; i < n; i++)
			bytes += all->text_offsets[which[i] + 1] - all->text_offsets[which[i]];
		text = palloc_extended(Max(bytes, 1), MCXT_ALLOC_HUGE);
		offsets[0] = 0;
		for (int i = 0; i < n; i++)
		{
			int64		size = all->text_offsets[which[i] + 1] - all->text_offsets[which[i]];

			memcpy(text + offsets[i], all->text + all->text_offsets[which[i]], size);
			offsets[i + 1] = offsets[i] + size;
		}
		out->text = text;
		out->text_offsets = offsets;
	}
	else
	{
		Size		row = row_bytes(all->kind, all->dim);
		char	   *rows = palloc_extended(row * (Size) Max(n, 1), MCXT_ALLOC_HUGE);

		for (int i = 0; i < n; i++)
			memcpy(rows + (Size) i * row, batch_rows(all) + (Size) which[i] * row, row);
		set_batch_rows(out, rows);
	}
}

void
genie_value_batch_free_copy(GenieValueBatch *copy)
{
	if (copy->text != NULL)
		pfree(unconstify(char *, copy->text));
	if (copy->text_offsets != NULL)
		pfree(unconstify(int64 *, copy->text_offsets));
	if (copy->vectors != NULL)
		pfree(unconstify(float *, copy->vectors));
	if (copy->codes != NULL)
		pfree(unconstify(uint64 *, copy->codes));
	copy->text = NULL;
	copy->text_offsets = NULL;
	copy->vectors = NULL;
	copy->codes = NULL;
}

void
genie_value_batch_concat(const GenieValueBatch *parts, int n, GenieValueBatch *out)
{
	int32		total = 0;
	Size		bytes = 0;

	for (int i = 0; i < n; i++)
	{
		total += parts[i].n;
		bytes += parts[i].kind == GENIE_VALUES_STRINGS ?
			(Size) parts[i].text_offsets[parts[i].n] :
			row_bytes(parts[i].kind, parts[i].dim) * (Size) parts[i].n;
	}
	*out = parts[0];
	out->n = total;
	if (parts[0].kind == GENIE_VALUES_STRINGS)
	{
		char	   *text = palloc_extended(Max(bytes, 1), MCXT_ALLOC_HUGE);
		int64	   *offsets = palloc_extended(sizeof(int64) * ((Size) total + 1), MCXT_ALLOC_HUGE);
		int32		at = 0;

		offsets[0] = 0;
		for (int i = 0; i < n; i++)
		{
			int64		base = offsets[at];

			memcpy(text + base, parts[i].text, parts[i].text_offsets[parts[i].n]);
			for (int32 q = 1; q <= parts[i].n; q++)
				offsets[at + q] = base + parts[i].text_offsets[q];
			at += parts[i].n;
		}
		out->text = text;
		out->text_offsets = offsets;
	}
	else
	{
		char	   *rows = palloc_extended(Max(bytes, 1), MCXT_ALLOC_HUGE);
		Size		at = 0;

		for (int i = 0; i < n; i++)
		{
			Size		b = row_bytes(parts[i].kind, parts[i].dim) * (Size) parts[i].n;

			memcpy(rows + at, batch_rows(&parts[i]), b);
			at += b;
		}
		set_batch_rows(out, rows);
	}
}

/* ---- sets ---- */

genie_status
genie_value_set_create(const GenieValueBatch *batch, GenieValueSet *set, genie_error *err)
{
	memset(set, 0, sizeof(*set));
	set->kind = batch->kind;
	if (batch->kind == GENIE_VALUES_STRINGS)
		return genie_strings_create(batch->text, batch->text_offsets, batch->n, &set->strings, err);
	if (batch->kind == GENIE_VALUES_CODES)
	{
		uint64	   *rows;
		genie_status status = genie_codes_create_unsealed(batch->n, batch->dim, genie_cpu_threads, &set->codes, &rows,
														   err);

		if (status != GENIE_OK)
			return status;
		memcpy(rows, batch->codes, row_bytes(batch->kind, batch->dim) * (Size) batch->n);
		status = genie_codes_seal(set->codes, err);
		if (status != GENIE_OK)
		{
			genie_codes_free(set->codes);
			set->codes = NULL;
		}
		return status;
	}
	return genie_vectors_create(batch->vectors, batch->n, batch->dim, &set->vectors, err);
}

void
genie_value_set_free(GenieValueSet *set)
{
	genie_strings_free(set->strings);	/* the GPU copy included */
	genie_vectors_free(set->vectors);
	genie_codes_free(set->codes);
	set->strings = NULL;
	set->vectors = NULL;
	set->codes = NULL;
}

genie_status
genie_value_set_permutations(const GenieValueSet *objects, const GenieValueSet *permutants,
							 genie_engine_kind device, const genie_engine_options *options,
							 uint8 *rows, genie_error *err)
{
	Assert(objects->kind == permutants->kind);
	if (objects->kind == GENIE_VALUES_STRINGS)
		return genie_strings_permutations(objects->strings, permutants->strings, device, options,
										  rows, err);
	if (objects->kind == GENIE_VALUES_VECTORS)
		return genie_vectors_permutations(objects->vectors, permutants->vectors, device, options,
										  rows, err);
	err->status = GENIE_INVALID_ARGUMENT;
	snprintf(err->message, sizeof(err->message), "codes have no permutation index");
	return GENIE_INVALID_ARGUMENT;
}

bool
genie_value_set_made(const GenieValueSet *set)
{
	return set->strings != NULL || set->vectors != NULL || set->codes != NULL;
}

size_t
genie_value_set_host_bytes(const GenieValueSet *set)
{
	switch (set->kind)
	{
		case GENIE_VALUES_STRINGS:
			return genie_strings_memory_bytes(set->strings);
		case GENIE_VALUES_CODES:
			return genie_codes_memory_bytes(set->codes);
		default:
			return genie_vectors_memory_bytes(set->vectors);
	}
}

size_t
genie_value_set_device_bytes(const GenieValueSet *set)
{
	switch (set->kind)
	{
		case GENIE_VALUES_STRINGS:
			return genie_strings_device_bytes(set->strings);
		case GENIE_VALUES_CODES:
			return genie_codes_device_bytes(set->codes);
		default:
			return genie_vectors_device_bytes(set->vectors);
	}
}

int32
genie_value_set_dim(const GenieValueSet *set)
{
	switch (set->kind)
	{
		case GENIE_VALUES_VECTORS:
			return genie_vectors_dim(set->vectors);
		case GENIE_VALUES_CODES:
			return genie_codes_bits(set->codes);
		default:
			return 0;
	}
}

int32
genie_value_set_length(const GenieValueSet *set, int32 id)
{
	return set->kind == GENIE_VALUES_STRINGS ? genie_strings_length(set->strings, id) : 0;
}

/* ---- scans ---- */

genie_status
genie_value_set_scan(const GenieValueSet *set, genie_engine_kind device,
					 const genie_engine_options *options, const GenieValueBatch *queries, int32 k,
					 const uint8 *excluded, const int64 *candidate_offsets,
					 const int32 *candidates, const genie_cluster_list *list, genie_list_use list_use,
					 GenieValueFound *found, genie_error *err)
{
	memset(found, 0, sizeof(*found));
	found->kind = set->kind;
	Assert(queries->kind == set->kind);
	if (set->kind == GENIE_VALUES_STRINGS)
	{
		genie_string_scan scan;

		memset(&scan, 0, sizeof(scan));
		scan.n_queries = queries->n;
		scan.query_text = queries->text;
		scan.query_text_offsets = queries->text_offsets;
		scan.k = k;
		scan.excluded = excluded;
		scan.candidate_offsets = candidate_offsets;
		scan.candidates = candidates;
		return genie_strings_scan(set->strings, device, options, &scan, &found->strings, err);
	}
	else if (set->kind == GENIE_VALUES_CODES)
	{
		genie_code_scan scan;

		memset(&scan, 0, sizeof(scan));
		scan.n_queries = queries->n;
		scan.queries = queries->codes;
		scan.k = k;
		scan.excluded = excluded;
		scan.candidate_offsets = candidate_offsets;
		scan.candidates = candidates;
		return genie_codes_scan(set->codes, device, options, &scan, &found->codes, err);
	}
	else
	{
		genie_vector_scan scan;

		memset(&scan, 0, sizeof(scan));
		scan.n_queries = queries->n;
		scan.queries = queries->vectors;
		scan.k = k;
		scan.excluded = excluded;
		scan.candidate_offsets = candidate_offsets;
		scan.candidates = candidates;
		scan.list = list;
		scan.list_use = list_use;
		return genie_vectors_scan(set->vectors, device, options, &scan, &found->vectors, err);
	}
}

int32
genie_value_found_queries(const GenieValueFound *found)
{
	switch (found->kind)
	{
		case GENIE_VALUES_STRINGS:
			return found->strings->n_queries;
		case GENIE_VALUES_CODES:
			return found->codes->n_queries;
		default:
			return found->vectors->n_queries;
	}
}

const int64 *
genie_value_found_offsets(const GenieValueFound *found)
{
	switch (found->kind)
	{
		case GENIE_VALUES_STRINGS:
			return found->strings->query_offsets;
		case GENIE_VALUES_CODES:
			return found->codes->query_offsets;
		default:
			return found->vectors->query_offsets;
	}
}

int32
genie_value_found_object(const GenieValueFound *found, int64 i)
{
	switch (found->kind)
	{
		case GENIE_VALUES_STRINGS:
			return found->strings->objects[i];
		case GENIE_VALUES_CODES:
			return found->codes->objects[i];
		default:
			return found->vectors->objects[i];
	}
}

float8
genie_value_found_distance(const GenieValueFound *found, int64 i)
{
	switch (found->kind)
	{
		case GENIE_VALUES_STRINGS:
			return (float8) found->strings->distances[i];
		case GENIE_VALUES_CODES:
			return (float8) found->codes->distances[i];
		default:
			return found->vectors->distances[i];
	}
}

genie_engine_kind
genie_value_found_device(const GenieValueFound *found)
{
	switch (found->kind)
	{
		case GENIE_VALUES_STRINGS:
			return found->strings->device;
		case GENIE_VALUES_CODES:
			return found->codes->device;
		default:
			return found->vectors->device;
	}
}

void
genie_value_found_free(GenieValueFound *found)
{
	genie_string_results_free(found->strings);
	genie_vector_results_free(found->vectors);
	genie_code_results_free(found->codes);
	found->strings = NULL;
	found->vectors = NULL;
	found->codes = NULL;
}

genie_status
genie_value_set_within(const GenieValueSet *set, genie_engine_kind device,
					   const genie_engine_options *options,
					   const GenieValueBatch *queries, double radius, const uint8 *excluded,
					   const genie_cluster_list *list, const int64 *candidate_offsets,
					   const int32 *candidates, genie_range_results **results, genie_error *err)
{
	genie_range_scan scan;

	Assert(queries->kind == set->kind);
	memset(&scan, 0, sizeof(scan));
	scan.n_queries = queries->n;
	scan.radius = radius;
	scan.excluded = excluded;
	scan.list = list;
	scan.candidate_offsets = candidate_offsets;
	scan.candidates = candidates;
	if (set->kind == GENIE_VALUES_STRINGS)
	{
		scan.query_text = queries->text;
		scan.query_text_offsets = queries->text_offsets;
		return genie_strings_within(set->strings, device, options, &scan, results, err);
	}
	Assert(set->kind == GENIE_VALUES_VECTORS);
	scan.queries = queries->vectors;
	return genie_vectors_within(set->vectors, device, options, &scan, results, err);
}

/*
 * Values [first, first + n) of content as a batch (strings in place,
 * vectors copied into a matrix, a NULL one zero).
 */
void
genie_value_batch_from_content(const GenieIndexContent *content, GenieValuesKind kind, int32 dim,
							   int32 first, int32 n, GenieValueBatch *batch)
{
	memset(batch, 0, sizeof(*batch));
	batch->kind = kind;
	batch->n = n;
	if (kind == GENIE_VALUES_STRINGS)
	{
		int64	   *offsets = palloc_extended(sizeof(int64) * ((Size) n + 1), MCXT_ALLOC_HUGE);

		for (int32 i = 0; i <= n; i++)
			offsets[i] = content->value_offsets[first + i] - content->value_offsets[first];
		batch->text = content->value_data + content->value_offsets[first];
		batch->text_offsets = offsets;
	}
	else
	{
		float	   *matrix = palloc_extended(sizeof(float) * (Size) Max(n, 1) * dim,
											 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

		for (int32 i = 0; i < n; i++)
		{
			int64		at = content->value_offsets[first + i];
			int64		size = content->value_offsets[first + i + 1] - at;

			if (size == (int64) sizeof(float) * dim)
				memcpy(matrix + (Size) i * dim, content->value_data + at, size);
			else if (size != 0)
				elog(ERROR, "genie: a stored vector of %lld bytes where %d dimensions need %d",
					 (long long) size, dim, (int) sizeof(float) * dim);
			if ((i & 0xFFFF) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		batch->vectors = matrix;
		batch->dim = dim;
	}
}

/* Excluded flags of objects [first, first + n) of content: NULL or dead. */
uint8 *
genie_content_excluded(const GenieIndexContent *content, int32 first, int32 n)
{
	uint8	   *excluded = palloc_extended(Max(n, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	for (int32 i = 0; i < n; i++)
		excluded[i] = (content->objects[first + i].flags & (GENIE_OBJECT_NULL | GENIE_OBJECT_DEAD)) != 0;
	return excluded;
}

genie_status
genie_value_set_cluster_list(const GenieValueSet *set, const uint8 *excluded, int32 cluster_size,
							 int32 supercluster_clusters, int32 centres,
							 const genie_engine_options *options, genie_cluster_list **list,
							 genie_error *err)
{
	if (set->kind == GENIE_VALUES_STRINGS)
		return genie_strings_cluster_list(set->strings, excluded, cluster_size, supercluster_clusters,
										  (genie_cluster_centres) centres, options, list, err);
	Assert(set->kind == GENIE_VALUES_VECTORS);
	return genie_vectors_cluster_list(set->vectors, excluded, cluster_size, supercluster_clusters,
									  (genie_cluster_centres) centres, options, list, err);
}
