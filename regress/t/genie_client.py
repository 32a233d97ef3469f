"""Helpers for the TAP tests that talk to genie through psycopg 3 (Debian's
python3-psycopg): send bytes as the binary form of a genie type."""
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo


class Raw:
    """Bytes sent as the binary form of the type with the given OID."""

    def __init__(self, data, oid):
        self.data, self.oid = data, oid


class RawDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj):
        return obj.data

    def get_key(self, obj, format):
        return (Raw, obj.oid)

    def upgrade(self, obj, format):
        d = RawDumper(Raw)
        d.oid = obj.oid
        return d


def register_raw(conn):
    """Lets conn send Raw values; returns the OIDs of genie's query types."""
    conn.adapters.register_dumper(Raw, RawDumper)
    return {t: TypeInfo.fetch(conn, t).oid for t in ("genie_query", "genie_ranges", "genie_document_query")}
