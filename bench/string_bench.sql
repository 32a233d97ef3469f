-- Edit-distance search through SQL (issue 14), one session, one run.
--
-- Three query sets of 1024, 256 at each rate of 10, 20, 30 and 40%:
--   words/subst  random words of 6+ letters of the word list, that share of
--                their characters replaced by random letters (a-z)
--   words/edits  random words, that many random insertions, deletions and
--                substitutions
--   descr/edits  the short descriptions of the Debian package index (one row
--                per distinct description), edited the same way
-- Methods, top 1 and top 5: genie_similar (the 1024 as one batch) and
-- ORDER BY w <%> q LIMIT k (one statement per query) on each genie.device
-- value; pg_trgm GiST KNN (the `trgm` nearest by trigram distance) re-ranked
-- by levenshtein(); a sequential scan with levenshtein(), the truth.  The
-- last two are timed on the sample (`sample` queries per set, spread evenly
-- over the rates) and reported per query.
-- Exactness: every method's top-k distances against the sequential scan on
-- the sample; on all 1024 queries, the distances each genie method reports
-- against levenshtein() of the rows it returns, and its distance lists
-- against genie_similar on the CPU engine.
-- psql variables: words, descriptions (files for COPY), devices (e.g.
-- 'cpu,gpu'), sample, trgm.
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION genie;
CREATE EXTENSION pg_trgm;
CREATE EXTENSION fuzzystrmatch;

CREATE TABLE words (id serial PRIMARY KEY, w text);
COPY words (w) FROM :'words';
CREATE TABLE descr (id serial PRIMARY KEY, w text);
COPY descr (w) FROM :'descriptions';
DELETE FROM words WHERE length(w) > 255;	-- levenshtein()'s limit
DELETE FROM descr WHERE length(w) > 255;
VACUUM ANALYZE words, descr;

-- index builds and sizes: genie without and with stored strings, pg_trgm GiST
\o /dev/null
CREATE TABLE sizes (tab text, index text, build_ms numeric, pages bigint);
CREATE FUNCTION build(tab text, name text, ddl text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE ddl;
  INSERT INTO sizes VALUES (tab, name, extract(epoch FROM clock_timestamp() - t0) * 1000,
                            pg_relation_size(name::regclass) / current_setting('block_size')::int);
END $$;
SELECT build('words', 'words_nostr', 'CREATE INDEX words_nostr ON words USING genie (w genie_ngram_ops) WITH (store_strings = off)');
DROP INDEX words_nostr;
SELECT build('words', 'words_genie', 'CREATE INDEX words_genie ON words USING genie (w genie_ngram_ops)');
SELECT build('words', 'words_trgm', 'CREATE INDEX words_trgm ON words USING gist (w gist_trgm_ops)');
SELECT build('descr', 'descr_nostr', 'CREATE INDEX descr_nostr ON descr USING genie (w genie_ngram_ops) WITH (store_strings = off)');
DROP INDEX descr_nostr;
SELECT build('descr', 'descr_genie', 'CREATE INDEX descr_genie ON descr USING genie (w genie_ngram_ops)');
SELECT build('descr', 'descr_trgm', 'CREATE INDEX descr_trgm ON descr USING gist (w gist_trgm_ops)');

-- s with `n` of its characters, at distinct positions, replaced by random letters
CREATE FUNCTION substitute(s text, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE p int;
BEGIN
  FOR p IN SELECT x FROM generate_series(1, length(s)) x ORDER BY random() LIMIT n LOOP
    s := overlay(s placing chr(97 + floor(random() * 26)::int) from p for 1);
  END LOOP;
  RETURN s;
END $$;
-- s with `n` random insertions, deletions and substitutions of letters
CREATE FUNCTION mutate(s text, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE pos int; c text;
BEGIN
  FOR i IN 1 .. n LOOP
    pos := 1 + floor(random() * greatest(length(s), 1))::int;
    c := chr(97 + floor(random() * 26)::int);
    CASE floor(random() * 3)::int
      WHEN 0 THEN s := overlay(s placing c from pos for 1);
      WHEN 1 THEN s := overlay(s placing c from pos for 0);
      ELSE IF length(s) > 1 THEN s := overlay(s placing '' from pos for 1); END IF;
    END CASE;
  END LOOP;
  RETURN s;
END $$;

SELECT setseed(0.2026);
\o
CREATE TABLE sources AS
SELECT 'words' AS tab, row_number() OVER (ORDER BY random()) AS r, w FROM words WHERE length(w) >= 6;
DELETE FROM sources WHERE r > 2048;
INSERT INTO sources SELECT 'descr', row_number() OVER (ORDER BY random()), w FROM descr;
DELETE FROM sources WHERE tab = 'descr' AND r > 1024;
CREATE TABLE queries AS
SELECT set_name, tab, row_number() OVER (PARTITION BY set_name ORDER BY r) AS qid, rate, query
FROM (SELECT 'words/subst' AS set_name, tab, r, 0.1 * (1 + (r - 1) / 256) AS rate,
             substitute(w, greatest(1, round((0.1 * (1 + (r - 1) / 256)) * length(w))::int)) AS query
      FROM sources WHERE tab = 'words' AND r <= 1024
      UNION ALL
      SELECT 'words/edits', tab, r, 0.1 * (1 + (r - 1025) / 256),
             mutate(w, greatest(1, round((0.1 * (1 + (r - 1025) / 256)) * length(w))::int))
      FROM sources WHERE tab = 'words' AND r > 1024
      UNION ALL
      SELECT 'descr/edits', tab, r, 0.1 * (1 + (r - 1) / 256),
             mutate(w, greatest(1, round((0.1 * (1 + (r - 1) / 256)) * length(w))::int))
      FROM sources WHERE tab = 'descr') x;
SELECT set_name, count(*) AS queries, round(avg(length(query)), 1) AS avg_length,
       (SELECT count(*) FROM words) AS words_rows, (SELECT count(*) FROM descr) AS descr_rows
FROM queries GROUP BY set_name ORDER BY 1;

-- answers: the sorted top-k distances of each (set, k, method, device, query)
CREATE TABLE answers (set_name text, k int, method text, device text, qid bigint, d int[],
                      reported_ok bool);
CREATE TABLE timings (set_name text, k int, method text, device text, queries int, ms numeric);

-- the sequential scan: exact by definition, on the sample
CREATE FUNCTION run_seqscan(s text, tab text, n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE format($q$
    INSERT INTO answers
    SELECT %L, 5, 'levenshtein scan', NULL, q.qid,
           (SELECT array_agg(d ORDER BY d) FROM
             (SELECT levenshtein(w, q.query) d FROM %I ORDER BY 1 LIMIT 5) x), true
    FROM queries q WHERE q.set_name = %L AND q.qid %% (1024 / %s) = 0$q$, s, tab, s, n);
  INSERT INTO timings VALUES (s, 5, 'levenshtein scan', NULL, n, extract(epoch FROM clock_timestamp() - t0) * 1000);
  INSERT INTO timings VALUES (s, 1, 'levenshtein scan', NULL, n, extract(epoch FROM clock_timestamp() - t0) * 1000);
  INSERT INTO answers SELECT set_name, 1, method, device, qid, d[1:1], true FROM answers
  WHERE set_name = s AND method = 'levenshtein scan';
END $$;

-- pg_trgm: the `cand` nearest by trigram distance, re-ranked by levenshtein
CREATE FUNCTION run_trgm(s text, tab text, n int, cand int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN
  SET LOCAL enable_seqscan = off;
  t0 := clock_timestamp();
  EXECUTE format($q$
    INSERT INTO answers
    SELECT %L, 5, 'pg_trgm GiST %s + levenshtein', NULL, q.qid,
           (SELECT array_agg(d ORDER BY d) FROM
             (SELECT levenshtein(c.w, q.query) d FROM
               (SELECT w FROM %I ORDER BY w <-> q.query LIMIT %s) c ORDER BY 1 LIMIT 5) x), true
    FROM queries q WHERE q.set_name = %L AND q.qid %% (1024 / %s) = 0$q$, s, cand, tab, cand, s, n);
  INSERT INTO timings SELECT s, kk, 'pg_trgm GiST ' || cand || ' + levenshtein', NULL, n,
                             extract(epoch FROM clock_timestamp() - t0) * 1000 FROM unnest(ARRAY[1, 5]) kk;
  INSERT INTO answers SELECT set_name, 1, method, device, qid, d[1:1], true FROM answers
  WHERE set_name = s AND method = 'pg_trgm GiST ' || cand || ' + levenshtein';
END $$;

-- genie_similar: the 1024 queries of the set as one batch
CREATE FUNCTION run_similar(s text, tab text, dev text, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; qs text[];
BEGIN
  PERFORM set_config('genie.device', dev, true);
  qs := (SELECT array_agg(query ORDER BY qid) FROM queries WHERE set_name = s);
  PERFORM count(*) FROM genie_similar(tab || '_genie', qs[1:64], k);	-- warm: cache, device copy
  t0 := clock_timestamp();
  CREATE TEMP TABLE similar_out AS
    SELECT query_no, ctid AS row_tid, distance, exact FROM genie_similar(tab || '_genie', qs, k);
  INSERT INTO timings VALUES (s, k, 'genie_similar (batch)', dev, 1024,
                              extract(epoch FROM clock_timestamp() - t0) * 1000);
  EXECUTE format($q$
    INSERT INTO answers
    SELECT %L, %s, 'genie_similar (batch)', %L, o.query_no,
           array_agg(o.distance ORDER BY o.distance),
           bool_and(o.exact AND o.distance = levenshtein(t.w, q.query))
    FROM similar_out o JOIN %I t ON t.ctid = o.row_tid
    JOIN queries q ON q.set_name = %L AND q.qid = o.query_no
    GROUP BY o.query_no$q$, s, k, dev, tab, s);
  DROP TABLE similar_out;
END $$;

-- ORDER BY w <%> q LIMIT k: one statement per query
CREATE FUNCTION run_order_by(s text, tab text, dev text, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; r record; got text[];
BEGIN
  PERFORM set_config('genie.device', dev, true);
  SET LOCAL enable_seqscan = off;
  CREATE TEMP TABLE order_out (qid bigint, ws text[]);
  EXECUTE format('SELECT array(SELECT w FROM %I ORDER BY w <%%> $1 LIMIT $2)', tab)
    USING (SELECT query FROM queries WHERE set_name = s AND qid = 1), k;	-- warm
  t0 := clock_timestamp();
  FOR r IN SELECT qid, query FROM queries WHERE set_name = s ORDER BY qid LOOP
    EXECUTE format('SELECT array(SELECT w FROM %I ORDER BY w <%%> $1 LIMIT $2)', tab)
      INTO got USING r.query, k;
    INSERT INTO order_out VALUES (r.qid, got);
  END LOOP;
  INSERT INTO timings VALUES (s, k, 'ORDER BY <%> LIMIT k', dev, 1024,
                              extract(epoch FROM clock_timestamp() - t0) * 1000);
  -- the rows must come in distance order: their distances, in the order returned, are sorted
  INSERT INTO answers
  SELECT s, k, 'ORDER BY <%> LIMIT k', dev, o.qid,
         (SELECT array_agg(levenshtein(w, q.query) ORDER BY levenshtein(w, q.query)) FROM unnest(o.ws) w),
         (SELECT array_agg(levenshtein(w, q.query) ORDER BY n) FROM unnest(o.ws) WITH ORDINALITY u(w, n))
           = (SELECT array_agg(levenshtein(w, q.query) ORDER BY levenshtein(w, q.query)) FROM unnest(o.ws) w)
  FROM order_out o JOIN queries q ON q.set_name = s AND q.qid = o.qid;
  DROP TABLE order_out;
END $$;

\o /dev/null
SELECT count(run_seqscan(s, t, :sample)), count(run_trgm(s, t, :sample, :trgm))
FROM (VALUES ('words/subst', 'words'), ('words/edits', 'words'), ('descr/edits', 'descr')) v(s, t);
SELECT count(run_similar(s, t, dev, k)), count(run_order_by(s, t, dev, k))
FROM (VALUES ('words/subst', 'words'), ('words/edits', 'words'), ('descr/edits', 'descr')) v(s, t),
     unnest(string_to_array(:'devices', ',')) dev, unnest(ARRAY[1, 5]) k;
\o

\echo
\echo index size and build time
SELECT tab, index, round(build_ms) AS build_ms, pages, round(pages * 8 / 1024.0, 1) AS mb FROM sizes ORDER BY 1, 2;

\echo per query times; exact = top-k distances equal the sequential scan on the sample;
\echo reported = distances reported equal levenshtein() of the rows (ORDER BY: rows in distance order);
\echo same_as_cpu = distance lists equal genie_similar on the CPU engine, all 1024 queries
SELECT t.set_name, t.k, t.method, coalesce(t.device, '') AS device, t.queries AS timed,
       round(t.ms / t.queries, 3) AS ms_per_query, round(t.queries / (t.ms / 1000)) AS queries_per_s,
       round((s.ms / s.queries) / (t.ms / t.queries), 1) AS x_levenshtein_scan,
       (SELECT count(*) FROM answers a JOIN answers b ON b.set_name = a.set_name AND b.k = a.k
          AND b.qid = a.qid AND b.method = 'levenshtein scan'
        WHERE a.set_name = t.set_name AND a.k = t.k AND a.method = t.method
          AND a.device IS NOT DISTINCT FROM t.device AND a.d = b.d) || '/' || :sample AS exact,
       CASE WHEN t.method LIKE 'genie%' OR t.method LIKE 'ORDER%' THEN
         (SELECT count(*) FILTER (WHERE a.reported_ok) || '/' || count(*) FROM answers a
          WHERE a.set_name = t.set_name AND a.k = t.k AND a.method = t.method AND a.device = t.device) END
         AS reported,
       CASE WHEN t.method LIKE 'genie%' OR t.method LIKE 'ORDER%' THEN
         (SELECT count(*) || '/1024' FROM answers a JOIN answers b ON b.set_name = a.set_name AND b.k = a.k
            AND b.qid = a.qid AND b.method = 'genie_similar (batch)' AND b.device = 'cpu'
          WHERE a.set_name = t.set_name AND a.k = t.k AND a.method = t.method AND a.device = t.device
            AND a.d = b.d) END AS same_as_cpu
FROM timings t JOIN timings s ON s.set_name = t.set_name AND s.k = t.k AND s.method = 'levenshtein scan'
ORDER BY t.set_name DESC, t.k, t.ms / t.queries;
