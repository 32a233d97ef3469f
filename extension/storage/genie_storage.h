/*-------------------------------------------------------------------------
 *
 * genie_storage.h
 *	  How a genie index lives in PostgreSQL pages: the metapage, the chains,
 *	  their readers and writers, the pending list and the content lock.
 *
 * On disk (all WAL-logged with GenericXLog after the build):
 *	block 0			metapage: counts, chain heads, the content stamp
 *	directory chain	one GenieObjectEntry (heap TID + flags) per main object,
 *					by dense object id
 *	keyword chain	(keyword, postings count) pairs, keywords ascending: the
 *					Position Map
 *	postings chain	object ids grouped by keyword, ascending within a
 *					keyword: the List Array, packed (bit-packed gaps in
 *					blocks of 128; int32 ids in indexes of format 4)
 *	pending chain	objects inserted since the last merge (like GIN's fast
 *					update): records of (object id, TID, flags, keywords)
 *	values chain	each main object's stored value (its text, its vector),
 *					when the index keeps them
 *	permutants		the permutation index's m permutants, value records as
 *					the values chain's (WITH (permutants = m))
 *	permutations	m bytes per main object by id: the rank of each
 *					permutant by its distance to the object
 * A chain is a list of pages linked through GeniePageOpaque.next, from the
 * metapage's head to its tail (a reader stops at the tail: a page beyond it
 * may be left over from an interrupted write).  Any change of content bumps
 * the metapage's stamp, which validates the per-backend caches of the decoded
 * index (host and device copies).
 *
 * Concurrency.  The metapage's buffer lock is only held briefly.  Whole-index
 * work is serialised by a heavyweight lock on block 0 (waits for it can be
 * cancelled): a merge, which rewrites the chains and frees pages, holds it
 * in ExclusiveLock; everything else that reads or changes the content holds
 * it in ShareLock.  Under ShareLock the chains other than the pending list are
 * immutable but for DEAD flags (set by VACUUM for rows no snapshot can see),
 * and the pending list only grows beyond its committed end, which readers
 * take from the metapage.
 *
 * Atomicity of inserts.  An object's pending record is written in pieces
 * when it does not fit on the tail page; every piece but the last lands
 * beyond the committed end, and the last piece's WAL record also moves the
 * committed end (pending.tail, pending_tail_bytes) and the counts.  A crash
 * between pieces leaves only bytes beyond the committed end, which the next
 * insert overwrites.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_STORAGE_H
#define GENIE_STORAGE_H

#include "postgres.h"

#include "access/generic_xlog.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "storage/lmgr.h"
#include "utils/relcache.h"

#include "genie_utils.h"

#define GENIE_MAGIC				0x47454E49	/* "GENI" */
#define GENIE_FORMAT_VERSION	7	/* 2: committed end of the pending list; 3: encoding;
									 * 4: row schema and dictionary; 5: packed postings;
									 * 6: the permutation index's chains; 7: the list
									 * of clusters */
/*
 * What builds and merges write (genie.write_format's default and most):
 * format 6 only marks an index with permutants, so that a genie before it,
 * whose merges would drop the permutation chains, refuses the index.
 */
#define GENIE_FORMAT_WRITTEN	5
#define GENIE_FORMAT_PERMUTATION 6
/* and format 7 an index with a list of clusters (a genie before it would drop it) */
#define GENIE_FORMAT_CLUSTERS	7
#define GENIE_FORMAT_VERSION_MIN 4	/* the oldest format this genie reads */

/*
 * How the postings chain holds the List Array (GenieMetaPageData.
 * postings_codec): format 4 wrote int32 ids; format 5 packs each keyword's
 * list (genie/postings_codec.hpp, about a quarter of the bytes on skewed
 * data).  A merge or REINDEX of a format-4 index writes format 5.
 */
#define GENIE_POSTINGS_INT32	0
#define GENIE_POSTINGS_PACKED	1

/* genie.write_format: the format builds and merges write (tests of upgrades) */
extern int	genie_write_format;
#define GENIE_METAPAGE_BLKNO	0
#define GENIE_PAGE_ID			0xFF87	/* for pg_filedump and friends */

/*
 * What an index's keywords are made of: the encoding of the operator class's
 * type (genie_type.h), fixed at build time and kept in the metapage.
 */
#define GENIE_ENCODING_INT4_SET	1	/* genie_int4_ops: the int4 elements themselves */
#define GENIE_ENCODING_NGRAM	2	/* genie_ngram_ops: ordered n-grams of text */
#define GENIE_ENCODING_ROW		3	/* genie_row_ops: one (attribute, bucket) per column */
#define GENIE_ENCODING_VECTOR	4	/* genie_vector_ops: LSH keywords of real[] vectors */
#define GENIE_ENCODING_CODE		5	/* genie_bit_ops: binary codes, no keywords (exact search) */
#define GENIE_ENCODING_DOCUMENT	6	/* genie_tsvector_ops: (lexeme, weight class) per word */

/* The encodings whose values get codes from a dictionary chain (rows.dictionary). */
#define GENIE_ENCODING_HAS_DICTIONARY(kind) \
	((kind) == GENIE_ENCODING_ROW || (kind) == GENIE_ENCODING_DOCUMENT)

typedef struct GenieEncoding
{
	int16		kind;			/* GENIE_ENCODING_* */
	int16		ngram_n;		/* gram length of GENIE_ENCODING_NGRAM, else 0 */
} GenieEncoding;

/* kinds of page */
#define GENIE_PAGE_META			1
#define GENIE_PAGE_DIRECTORY	2
#define GENIE_PAGE_KEYWORDS		3
#define GENIE_PAGE_POSTINGS		4
#define GENIE_PAGE_PENDING		5
#define GENIE_PAGE_DELETED		6
#define GENIE_PAGE_DICTIONARY	7
#define GENIE_PAGE_VALUES		8
#define GENIE_PAGE_PERMUTATIONS	9
#define GENIE_PAGE_CLUSTERS		10

typedef struct GeniePageOpaqueData
{
	BlockNumber next;			/* next page of the chain, or InvalidBlockNumber */
	uint32		n_entries;		/* fixed-size entries, or pending bytes used */
	uint16		kind;			/* GENIE_PAGE_* */
	uint16		page_id;		/* GENIE_PAGE_ID */
} GeniePageOpaqueData;

typedef GeniePageOpaqueData *GeniePageOpaque;

#define GeniePageGetOpaque(page) ((GeniePageOpaque) PageGetSpecialPointer(page))
#define GeniePageGetData(page)	((char *) PageGetContents(page))
#define GENIE_PAGE_CAPACITY \
	(BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - MAXALIGN(sizeof(GeniePageOpaqueData)))

/* object flags */
#define GENIE_OBJECT_DEAD		0x0001	/* removed by VACUUM, excluded from results */
#define GENIE_OBJECT_NULL		0x0002	/* the indexed value is NULL: no keywords */

typedef struct GenieObjectEntry
{
	ItemPointerData tid;
	uint16		flags;
} GenieObjectEntry;

typedef struct GenieKeywordEntry
{
	int32		keyword;
	int32		count;			/* postings of this keyword */
} GenieKeywordEntry;

/*
 * A pending record: one object's keywords, or a piece of them when they do
 * not fit on one page (pieces of one object are consecutive and share its
 * id).  n_keywords int32 keywords follow the header.
 */
typedef struct GeniePendingRecord
{
	int32		object_id;
	ItemPointerData tid;
	uint16		flags;
	int32		n_keywords;
} GeniePendingRecord;

#define GENIE_PENDING_HEADER_SIZE	MAXALIGN(sizeof(GeniePendingRecord))

typedef struct GenieChain
{
	BlockNumber head;
	BlockNumber tail;
	int64		pages;
} GenieChain;

/*
 * Row indexes (genie_row_ops, see types/rows/genie_rows.c).  Each indexed attribute
 * gives a row one keyword, slot << GENIE_ROW_CODE_BITS | code: for a
 * BUCKETS attribute the code is its equal-width bucket between lo and hi,
 * for a VALUES attribute the code its value has in the dictionary, a chain
 * of (slot, code, value bytes) entries that inserts of new values append to.
 */
#define GENIE_ROW_MAX_ATTRIBUTES	32
#define GENIE_ROW_CODE_BITS			24
#define GENIE_ROW_MAX_CODES			(1 << GENIE_ROW_CODE_BITS)
#define GENIE_ROW_MAX_BUCKETS		1000000
#define GENIE_ROW_DEFAULT_BUCKETS	1024
#define GENIE_ROW_MAX_VALUE_BYTES	1024
#define GENIE_ROW_KEYWORD(slot, code) ((int32) (((uint32) (slot) << GENIE_ROW_CODE_BITS) | (uint32) (code)))

#define GENIE_ROW_BUCKETS	1		/* equal-width buckets between lo and hi */
#define GENIE_ROW_VALUES	2		/* one code per distinct value, exact */

typedef struct GenieRowAttribute
{
	int16		attnum;			/* of the table */
	int16		mode;			/* GENIE_ROW_BUCKETS or GENIE_ROW_VALUES */
	Oid			type;			/* the column's type at build */
	int32		n_buckets;		/* BUCKETS */
	int32		n_values;		/* VALUES: codes handed out */
	float8		lo;				/* BUCKETS: bucket 0 starts here */
	float8		hi;				/* BUCKETS: bucket n_buckets - 1 ends here */
} GenieRowAttribute;

typedef struct GenieRowSchema
{
	int32		n_attributes;
	int32		n_dictionary;	/* committed dictionary entries */
	uint32		dictionary_tail_bytes;	/* committed bytes of its tail page */
	uint32		pad;
	uint64		schema_id;		/* new at every build: binds genie_ranges values */
	GenieChain	dictionary;
	GenieRowAttribute attributes[GENIE_ROW_MAX_ATTRIBUTES];
} GenieRowSchema;

/* a dictionary entry; length value bytes follow, the whole INTALIGNed */
typedef struct GenieDictionaryEntry
{
	int32		code;
	int16		slot;
	uint16		length;
} GenieDictionaryEntry;

/*
 * Vector indexes (genie_vector_ops, genie_vector.c): the dimension every
 * vector has, and the LSH functions whose keywords the postings hold (see
 * genie/lsh.hpp; GENIE_LSH_E2LSH or GENIE_LSH_RBH, drawn from the seed).
 * Code indexes (genie_bit_ops, genie_bit.c) keep their codes' length in
 * bits as dimensions (a code is a point of Hamming space), the rest zero.
 */
/*
 * A vector index's schema; a code index (GENIE_ENCODING_CODE) keeps its
 * codes' bits as dimensions, its EWH functions as functions and its
 * sample_bits as buckets (each function reads min(buckets, dimensions)
 * bits).
 */
typedef struct GenieVectorSchema
{
	int32		dimensions;		/* 0 until the first vector (built on an empty table) */
	int32		family;			/* GENIE_LSH_* */
	int32		functions;		/* m; 0: no LSH keywords (exact search only) */
	int32		buckets;		/* each function re-hashed into [0, buckets) */
	float8		width;			/* E2LSH: bucket width; RBH: kernel width */
	uint64		seed;
} GenieVectorSchema;

typedef struct GenieMetaPageData
{
	uint32		magic;
	uint32		format_version;
	uint64		stamp;			/* changes with every change of content */
	int32		split_length;	/* postings sublist length used by the engines */
	int32		n_objects;		/* dense ids handed out (main + pending) */
	int32		n_main_objects; /* ids below this are in the main postings */
	int32		n_dead;			/* objects flagged dead */
	int32		n_keywords;		/* distinct keywords of the main postings */
	int32		n_pending;		/* objects in the pending list */
	int64		n_postings;		/* postings of the main postings */
	int64		pending_bytes;	/* bytes used by pending records */
	uint32		pending_tail_bytes; /* committed bytes on the pending tail page */

	/*
	 * Bumped by every merge (which rewrites the main postings and may
	 * renumber objects): with the relfilenode it names a version of the main
	 * postings for the genie service.  It fills what was padding, so indexes
	 * built before it read 0 until their first merge.
	 */
	uint32		main_version;
	GenieChain	directory;
	GenieChain	keywords;
	GenieChain	postings;
	GenieChain	pending;
	GenieEncoding encoding;
	GenieRowSchema rows;		/* GENIE_ENCODING_ROW and _DOCUMENT: the dictionary */

	/*
	 * Stored values: every object's value as bytes, kept in the index so that
	 * the searches that need the values themselves read them from the index
	 * instead of the table: the text as UTF-8 (genie_ngram_ops with
	 * store_strings on, the default: exact edit distances) or the vector's
	 * float4 elements (genie_vector_ops: exact Euclidean distances).  The
	 * main objects' are the values chain, one (int32 byte length, bytes)
	 * record per object in id order, unaligned; a pending object's follow
	 * its keywords in its pending record (genie_pending.c).  These fields
	 * come last: metapages written before them read zeros, that is no values
	 * and no vectors.
	 */
	uint32		values_stored;
	uint32		values_pad;
	int64		value_bytes;	/* bytes of the values chain */
	GenieChain	values;
	GenieVectorSchema vectors;	/* GENIE_ENCODING_VECTOR and _CODE only */

	/* GENIE_POSTINGS_*: zeros (int32 ids) on metapages of format 4 */
	uint32		postings_codec;
	uint32		postings_pad;
	int64		postings_bytes; /* of the postings chain, when packed */

	/*
	 * The permutation index (search/genie_permutation.c), last: metapages
	 * written before it read zeros, no permutants.  permutants is the m
	 * asked at build; the permutants are drawn (with permutation_seed) by
	 * the build or, on an index built with fewer than m objects, by the
	 * first merge that has them: until then permutants_chosen is 0 and the
	 * index is searched exactly.
	 */
	int32		permutants;
	int32		permutants_chosen;
	uint64		permutation_seed;
	int64		permutant_bytes;	/* of the permutants chain */
	GenieChain	permutant_values;	/* permutants_chosen value records */
	GenieChain	permutations;	/* n_main_objects rows of permutants bytes */

	/*
	 * The List of Clusters (search/genie_clusters.c), last: metapages written
	 * before it read zeros, no list.  cluster_size is 0 unless the index was
	 * built WITH (cluster_list = on); cluster_list_bytes 0 while the list is
	 * empty (no main object with a value).  The chain holds the list's stored
	 * form (genie_cluster_list_store), naming the main objects by id.
	 */
	int32		cluster_size;
	int32		supercluster_clusters;
	int64		cluster_list_bytes;
	GenieChain	cluster_list;

	/*
	 * How the list's centres are picked (GENIE_CLUSTER_CENTRES_*, the
	 * cluster_centres storage parameter), for the merges that build it
	 * again; last: metapages written before it read 0, the paper's sum rule,
	 * which is how their lists were built.
	 */
	int32		cluster_centres;
	int32		cluster_centres_pad;
} GenieMetaPageData;

typedef GenieMetaPageData *GenieMetaPage;

/* main_version took padding: the layout of existing metapages is unchanged */
StaticAssertDecl(offsetof(GenieMetaPageData, directory) == 64,
				 "the genie metapage layout changed");

#define GeniePageGetMeta(page)	((GenieMetaPage) PageGetContents(page))

/* reloptions */
typedef struct GenieOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	int			split_length;	/* postings sublist length (load balancing) */
	int			pending_list_limit; /* kB of pending records that trigger a merge */
	int			ngram_n;		/* gram length of genie_ngram_ops (read at build only) */
	int			buckets;		/* genie_row_ops: bucket budget per attribute (build only) */
	int			attributes;		/* genie_row_ops: offset of the attribute list, or 0 */
	bool		store_strings;	/* genie_ngram_ops: keep the strings (build only) */
	int			family;			/* genie_vector_ops: GENIE_LSH_* (build only) */
	int			functions;		/* m: LSH functions (genie_vector_ops, -1 Equation 9), EWH
								 * functions (genie_bit_ops, -1 none) (build only) */
	double		width;			/* genie_vector_ops: LSH width, 0 estimated (build only) */
	int			seed;			/* draws the LSH or EWH functions (build only) */
	int			sample_bits;	/* genie_bit_ops: h, bits each EWH function reads (build only) */
	int			errors;			/* genie_bit_ops: e, EWH buckets asked up to e errors (queries) */
	int			weights;		/* genie_bit_ops: offset of the alpha_r list, or 0 (queries) */
	int			permutants;		/* the permutation index's m, 0 none (build only) */
	bool		cluster_list;	/* the List of Clusters (build only) */
	int			cluster_size;	/* its K (build only) */
	int			supercluster_clusters;	/* its N, 0 no superclusters (build only) */
	int			cluster_centres;	/* GENIE_CLUSTER_CENTRES_* (build only) */
} GenieOptions;

/* The List of Clusters' defaults: the paper's cluster size, superclusters of 16 */
#define GENIE_DEFAULT_CLUSTER_SIZE	256
#define GENIE_DEFAULT_SUPERCLUSTER_CLUSTERS 16

/* genie_bit_ops: EWH's defaults (README, "Binary codes") */
#define GENIE_EWH_DEFAULT_SAMPLE_BITS 16
#define GENIE_EWH_DEFAULT_ERRORS	2


/* genie_storage.c: pages and chains */
extern void genie_init_page(Page page, uint16 kind);
extern void genie_init_metapage(Page page, int32 split_length, const GenieEncoding *encoding);
extern void genie_metapage_set_lower(Page page);
extern Buffer genie_new_buffer(Relation index);
extern void genie_free_chain(Relation index, GenieChain chain);

/* the heavyweight lock on block 0 (see above) */
#define GENIE_CONTENT_LOCK_SHARE(index)		LockPage((index), GENIE_METAPAGE_BLKNO, ShareLock)
#define GENIE_CONTENT_UNLOCK_SHARE(index)	UnlockPage((index), GENIE_METAPAGE_BLKNO, ShareLock)
#define GENIE_CONTENT_LOCK_EXCLUSIVE(index)	LockPage((index), GENIE_METAPAGE_BLKNO, ExclusiveLock)
#define GENIE_CONTENT_UNLOCK_EXCLUSIVE(index) UnlockPage((index), GENIE_METAPAGE_BLKNO, ExclusiveLock)

/* Raises an error unless page is the metapage of a genie index of this format. */
extern void genie_check_metapage(Relation index, Page page);

/* A copy of the metapage's content, taken under its buffer lock. */
extern void genie_read_meta(Relation index, GenieMetaPageData *meta);

/*
 * Appends fixed-size entries to a new chain: without WAL while the index is
 * built (log_newpage_range logs it after), with full-page GenericXLog images
 * when a merge writes it.
 */
typedef struct GenieChainWriter
{
	Relation	index;
	uint16		kind;
	Size		entry_size;
	Buffer		buffer;			/* current tail, pinned (locked only while written) */
	GenieChain	chain;
	bool		wal;			/* log each page with GenericXLog (compaction) */
} GenieChainWriter;

extern void genie_chain_writer_init(GenieChainWriter *w, Relation index, uint16 kind,
									Size entry_size, bool wal);
extern void genie_chain_writer_append(GenieChainWriter *w, const void *entries, int64 count);
extern GenieChain genie_chain_writer_finish(GenieChainWriter *w);

/* Raises an error unless page is a genie page of this kind. */
extern void genie_check_page(Relation index, Page page, BlockNumber blkno, uint16 kind);
/* palloc in CurrentMemoryContext beyond 1 GB, at least 1 byte */
extern void *genie_alloc_huge(Size size);

/* Reads every fixed-size entry of a chain into one palloc'd array. */
extern void *genie_chain_read(Relation index, GenieChain chain, Size entry_size,
							  int64 expected, int64 *count);

/*
 * The same without a copy: each(arg, data, bytes) for every page's
 * entries in chain order (data points into the page, valid during the
 * call); the number of entries.
 */
typedef void (*GenieChainPageFn) (void *arg, const char *data, Size bytes);
extern int64 genie_chain_walk(Relation index, GenieChain chain, Size entry_size, int64 expected,
							  GenieChainPageFn each, void *arg);

/* The decoded content of an index, as read from its pages. */
typedef struct GenieIndexContent
{
	uint64		stamp;
	GenieEncoding encoding;
	int32		split_length;
	int32		n_objects;
	int32		n_main_objects;
	int32		n_dead;
	int64		n_postings;
	int32		n_keywords;
	GenieObjectEntry *objects;	/* n_objects entries: main, then pending */
	int32	   *keywords;		/* main Position Map */
	int64	   *keyword_offsets;	/* n_keywords + 1 */
	int32	   *postings;		/* main List Array */
	int64	   *pending_offsets;	/* pending CSR: n_objects - n_main_objects + 1 */
	BlockNumber postings_head;	/* first page of the main List Array's chain */
	uint32		main_version;	/* see GenieMetaPageData */
	int32	   *pending_keywords;
	BlockNumber n_pages;

	/*
	 * Stored values (see GenieMetaPageData): value_offsets has n_objects +
	 * 1 byte offsets into value_data.  The pending objects' are read with
	 * the pending list; the main objects' only by genie_read_values (before
	 * it their ranges are empty).
	 */
	bool		values_stored;
	GenieVectorSchema vectors;	/* GENIE_ENCODING_VECTOR and _CODE */
	char	   *value_data;
	int64	   *value_offsets;
	int64		pending_value_bytes;
	char	   *pending_value_data;	/* pending objects' values, CSR by local id */
	int64	   *pending_value_offsets;
} GenieIndexContent;

extern uint64 genie_read_stamp(Relation index);


/*
 * Appending variable-size records at the committed end of a chain (the
 * pending list, a row index's dictionary) inside the caller's GenericXLog
 * record: the tail page at (tail, tail_bytes) is registered, whatever an
 * interrupted write left beyond tail_bytes is dropped, and when fewer than
 * min_room bytes are left a new page is linked after it.  The caller writes
 * its bytes at spot.offset of spot.page, calls genie_chain_append_written,
 * moves the chain's committed end in the metapage when it means to, finishes
 * the record and then calls genie_chain_append_release.
 */
typedef struct GenieAppendSpot
{
	Relation	index;
	Buffer		tailbuf;		/* the old tail, locked, or InvalidBuffer */
	Buffer		newbuf;			/* a page linked after it, or InvalidBuffer */
	Page		page;			/* the registered page the bytes go to */
	BlockNumber block;			/* its block number */
	uint32		offset;			/* where the bytes go on it */
	Size		room;			/* bytes free from offset on */
	bool		new_page;		/* block is a page added by this call */
	bool		new_head;		/* the chain was empty: block is its head */
} GenieAppendSpot;

extern void genie_chain_append_begin(GenericXLogState *state, Relation index, uint16 kind,
									 BlockNumber tail, uint32 tail_bytes, Size min_room,
									 GenieAppendSpot *spot);
extern void genie_chain_append_written(GenieAppendSpot *spot, Size size);
extern void genie_chain_append_release(GenieAppendSpot *spot);

#endif							/* GENIE_STORAGE_H */
