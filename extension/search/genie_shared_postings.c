/*-------------------------------------------------------------------------
 *
 * genie_shared_postings.c
 *	  Index versions' main postings read from the genie service's copy in
 *	  shared memory.
 *
 *	  On a server whose genie service has no usable GPU, sending each search
 *	  to the service only hands CPU work from one process to another: the
 *	  hand-off (two wake-ups a search) and one search thread against many
 *	  backends cost throughput, and each backend's own copy would cost memory.
 *	  So the service keeps each version's main postings in a segment of
 *	  shared memory (GenieSharedPostings), and a backend maps it and searches
 *	  it on its own CPU engine: one copy for the server, no search waiting
 *	  for the service.  The segment lives while the service or any backend
 *	  has it mapped; a backend lets go when its cache drops the last entry
 *	  of the version (genie_cache.c decides when to map and to let go).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/dsm.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "search/genie_shared_postings.h"
#include "service/genie_service_client.h"

/*
 * The segment's header, when it is of version key and its arrays lie
 * within it; NULL otherwise (a segment being dropped and its handle reused
 * is thereby never read as postings).
 */
static const GenieSharedPostings *
check_segment(dsm_segment *seg, const GenieServiceKey *key, int32 split_length)
{
	const GenieSharedPostings *header = dsm_segment_address(seg);
	Size		length = dsm_segment_map_length(seg);
	Size		data_bytes = TYPEALIGN(8, sizeof(int32) * key->n_keywords) +
		sizeof(int64) * (key->n_keywords + 1) + sizeof(int32) * key->n_postings;

	if (length < sizeof(GenieSharedPostings) || header->magic != GENIE_SHARED_POSTINGS_MAGIC ||
		!genie_service_keys_equal(&header->key, key) ||
		header->data_offset % 8 != 0 || header->data_offset < sizeof(GenieSharedPostings) ||
		header->data_bytes != data_bytes || header->data_offset + data_bytes > length ||
		header->max_object_keywords < 0 || header->split_length != split_length)
		return NULL;
	return header;
}

/*
 * This backend's mappings of the service's segments, one per version: the
 * entries of a version (a new one each time the pending list changes)
 * read the same mapping, which dsm_attach could not make twice; it goes
 * with the last of them.
 */
typedef struct SharedMapping
{
	GenieServiceKey key;
	dsm_segment *seg;
	dsm_handle	handle;
	int			refs;			/* entries reading it */
	bool		stale;			/* the service holds another copy or none: no new entry reads it */
} SharedMapping;

static SharedMapping *mappings = NULL;
static int	n_mappings = 0;
static int	max_mappings = 0;
static uint64 seen_dropped = 0;

static SharedMapping *
find_mapping(const GenieServiceKey *key)
{
	for (int i = 0; i < n_mappings; i++)
		if (!mappings[i].stale && genie_service_keys_equal(&mappings[i].key, key))
			return &mappings[i];
	return NULL;
}

/* Room for one more mapping; before dsm_attach, so that nothing fails after it. */
static void
reserve_mapping(void)
{
	if (n_mappings < max_mappings)
		return;
	max_mappings = Max(8, max_mappings * 2);
	mappings = mappings == NULL
		? MemoryContextAlloc(TopMemoryContext, sizeof(SharedMapping) * max_mappings)
		: repalloc(mappings, sizeof(SharedMapping) * max_mappings);
}

void
genie_shared_postings_release(dsm_segment *seg)
{
	for (int i = 0; i < n_mappings; i++)
	{
		if (mappings[i].seg != seg)
			continue;
		if (--mappings[i].refs == 0)
		{
			dsm_detach(seg);
			mappings[i] = mappings[--n_mappings];
		}
		return;
	}
	dsm_detach(seg);			/* not reached: every mapping is in the table */
}

/* The mapping's postings as a borrowed index; NULL when they are not version key's. */
static genie_index *
borrow_mapping(SharedMapping *m, const GenieServiceKey *key, int32 split_length)
{
	const GenieSharedPostings *header = check_segment(m->seg, key, split_length);
	const char *data;
	Size		keywords_bytes = TYPEALIGN(8, sizeof(int32) * key->n_keywords);
	genie_index_options options;
	genie_index *index = NULL;
	genie_error err;

	if (header == NULL)
		return NULL;
	data = (const char *) header + header->data_offset;
	memset(&options, 0, sizeof(options));
	options.split_length = header->split_length;
	/* the worker checked the postings when it made the segment */
	if (genie_index_borrow(key->n_main_objects, key->n_keywords, (const int32 *) data,
						   (const int64 *) (data + keywords_bytes),
						   (const int32 *) (data + keywords_bytes +
											sizeof(int64) * (key->n_keywords + 1)),
						   header->max_object_keywords, &options, &index, &err) != GENIE_OK)
		return NULL;
	m->refs++;
	return index;
}

/*
 * The service's segment of version key: DSM_HANDLE_INVALID when it holds
 * the postings in its own memory, and false when it cannot say (gone, an
 * engine error: a search through it says so).  A version it does not hold
 * is handed over first; while another backend hands it over, this one
 * waits for that, up to a second, as a search through the service does.
 */
static bool
ask_segment(const GenieServiceKey *key, Oid index_oid, GenieShipPostings ship, void *ship_arg,
			dsm_handle *handle)
{
	TimestampTz since = 0;
	genie_error err;

	for (;;)
	{
		GenieServiceOutcome outcome = genie_service_share(key, index_oid, handle, &err);

		if (outcome == GENIE_SERVICE_OK)
			return true;
		if (outcome != GENIE_SERVICE_NOT_RESIDENT)
			return false;
		/* handed over once a call: a version the service cannot keep is searched by it */
		if (since == 0)
		{
			since = GetCurrentTimestamp();
			outcome = ship(ship_arg, &err);
			if (outcome == GENIE_SERVICE_OK)
				continue;
			if (outcome != GENIE_SERVICE_NOT_RESIDENT)
				return false;
		}
		if (!genie_service_wait_handover(since))
			return false;
	}
}

GenieSharedOutcome
genie_shared_postings_map(const GenieServiceKey *key, Oid index_oid, int32 split_length,
						  GenieShipPostings ship, void *ship_arg, genie_index **index,
						  dsm_segment **seg_out)
{
	dsm_handle	handle = DSM_HANDLE_INVALID;
	SharedMapping *m;
	dsm_segment *seg;

	*index = NULL;
	*seg_out = NULL;
	/* another entry of the version mapped it: no round trip */
	m = find_mapping(key);
	if (m != NULL)
	{
		*index = borrow_mapping(m, key, split_length);
		if (*index == NULL)
			return GENIE_SHARED_NOT_NOW;
		*seg_out = m->seg;
		return GENIE_SHARED_MAPPED;
	}

	if (!ask_segment(key, index_oid, ship, ship_arg, &handle))
		return GENIE_SHARED_NOT_NOW;
	if (handle == DSM_HANDLE_INVALID)
		return GENIE_SHARED_REFUSED;
	/* mapped by this backend already: one it holds as stale (the service answered before it dropped it) */
	if (dsm_find_mapping(handle) != NULL)
		return GENIE_SHARED_NOT_NOW;
	reserve_mapping();
	/* NULL: the service dropped the version since it answered */
	seg = dsm_attach(handle);
	if (seg == NULL)
		return GENIE_SHARED_NOT_NOW;
	/* the backend's until its last entry of the version goes, not the statement's */
	dsm_pin_mapping(seg);
	m = &mappings[n_mappings++];
	m->key = *key;
	m->seg = seg;
	m->handle = handle;
	m->refs = 0;
	m->stale = false;
	*index = borrow_mapping(m, key, split_length);
	if (*index == NULL)
	{
		/* not the version asked for (the handle reused after a drop), or no memory: next time */
		n_mappings--;
		dsm_detach(seg);
		return GENIE_SHARED_NOT_NOW;
	}
	*seg_out = seg;
	return GENIE_SHARED_MAPPED;
}

uint64
genie_shared_postings_stale(void)
{
	uint64		dropped;

	if (n_mappings == 0 || genie_service_shared == NULL)
		return 0;
	dropped = pg_atomic_read_u64(&genie_service_shared->shared_dropped);
	return dropped != seen_dropped ? dropped : 0;
}

void
genie_shared_postings_checked(uint64 dropped)
{
	seen_dropped = dropped;
}

bool
genie_shared_postings_current(dsm_segment *seg, const GenieServiceKey *key)
{
	dsm_handle	held;

	(void) genie_service_resident(key, &held);
	for (int i = 0; i < n_mappings; i++)
		if (mappings[i].seg == seg && mappings[i].handle != held)
			mappings[i].stale = true;
	return held != DSM_HANDLE_INVALID && held == dsm_segment_handle(seg);
}
