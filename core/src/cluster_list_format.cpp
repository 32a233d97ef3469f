// The List of Clusters' stored form (see genie/cluster_list.hpp): the
// checks every list passes when it is read back, and the little-endian
// serialisation that the index pages hold.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "genie/cluster_list.hpp"

namespace genie {
namespace {

void PutBytes(std::vector<uint8_t>* out, const void* p, std::size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  out->insert(out->end(), b, b + n);
}

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  PutBytes(out, &v, sizeof(v));
}

class Reader {
 public:
  Reader(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  template <typename T>
  bool Get(T* v) {
    if (size_ - at_ < sizeof(T)) return false;
    std::memcpy(v, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  std::size_t left() const { return size_ - at_; }

 private:
  const uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

constexpr uint32_t kMagic = 0x43534c47;  // "GLSC"
constexpr uint32_t kFormat = 1;

void PutCluster(std::vector<uint8_t>* out, const Cluster& c) {
  Put(out, c.centre);
  Put(out, c.count);
  Put(out, c.begin);
  Put(out, c.radius);
  Put(out, c.outside);
}

bool GetCluster(Reader* r, Cluster* c) {
  return r->Get(&c->centre) && r->Get(&c->count) && r->Get(&c->begin) && r->Get(&c->radius) &&
         r->Get(&c->outside);
}

}  // namespace

Status CheckClusterList(const ClusterList& list) {
  auto corrupt = [](const std::string& what) {
    return Status::InvalidArgument("a corrupt list of clusters: " + what);
  };
  if (list.n_objects < 0 || list.members.size() > static_cast<std::size_t>(list.n_objects))
    return corrupt("more members than objects");
  std::vector<uint8_t> seen(static_cast<std::size_t>(list.n_objects), 0);
  for (int32_t o : list.members) {
    if (o < 0 || o >= list.n_objects) return corrupt("a member out of range");
    if (seen[static_cast<std::size_t>(o)]) return corrupt("a member listed twice");
    seen[static_cast<std::size_t>(o)] = 1;
  }
  auto check_ball = [&](const Cluster& c, int64_t begin) {
    return c.begin == begin && c.count >= 1 &&
           c.begin + c.count <= static_cast<int64_t>(list.members.size()) &&
           list.members[static_cast<std::size_t>(c.begin)] == c.centre && !std::isnan(c.radius) &&
           !std::isnan(c.outside) && c.radius >= 0 && c.outside >= 0;
  };
  int64_t at = 0;
  for (const Cluster& c : list.clusters) {
    if (!check_ball(c, at)) return corrupt("a cluster out of order");
    at += c.count;
  }
  if (at != static_cast<int64_t>(list.members.size())) return corrupt("members in no cluster");
  int64_t next_cluster = 0;
  for (const Supercluster& sc : list.superclusters) {
    if (sc.first_cluster != next_cluster || sc.n_clusters < 1 ||
        sc.first_cluster + static_cast<int64_t>(sc.n_clusters) >
            static_cast<int64_t>(list.clusters.size()))
      return corrupt("a supercluster out of order");
    const Cluster& first = list.clusters[static_cast<std::size_t>(sc.first_cluster)];
    const Cluster& last = list.clusters[static_cast<std::size_t>(sc.first_cluster + sc.n_clusters - 1)];
    if (!check_ball(sc.ball, first.begin) || sc.ball.count != last.begin + last.count - first.begin)
      return corrupt("a supercluster's members");
    next_cluster += sc.n_clusters;
  }
  if (next_cluster != static_cast<int64_t>(list.clusters.size()))
    return corrupt("clusters in no supercluster");
  return Status::Ok();
}

std::vector<uint8_t> SerializeClusterList(const ClusterList& list) {
  std::vector<uint8_t> out;
  out.reserve(32 + list.superclusters.size() * 40 + list.clusters.size() * 32 +
              list.members.size() * 4);
  Put(&out, kMagic);
  Put(&out, kFormat);
  Put(&out, list.n_objects);
  Put(&out, list.cluster_size);
  Put(&out, list.supercluster_clusters);
  Put(&out, static_cast<int32_t>(list.superclusters.size()));
  Put(&out, static_cast<int32_t>(list.clusters.size()));
  Put(&out, static_cast<int32_t>(list.members.size()));
  for (const Supercluster& sc : list.superclusters) {
    PutCluster(&out, sc.ball);
    Put(&out, sc.first_cluster);
    Put(&out, sc.n_clusters);
  }
  for (const Cluster& c : list.clusters) PutCluster(&out, c);
  PutBytes(&out, list.members.data(), list.members.size() * sizeof(int32_t));
  return out;
}

Status DeserializeClusterList(const uint8_t* data, std::size_t size, ClusterList* out) {
  Reader r(data, size);
  uint32_t magic = 0;
  uint32_t format = 0;
  int32_t n_super = 0;
  int32_t n_clusters = 0;
  int32_t n_members = 0;
  ClusterList list;
  if (!r.Get(&magic) || !r.Get(&format) || magic != kMagic || format != kFormat)
    return Status::InvalidArgument("a corrupt list of clusters: not a list of clusters");
  if (!r.Get(&list.n_objects) || !r.Get(&list.cluster_size) ||
      !r.Get(&list.supercluster_clusters) || !r.Get(&n_super) || !r.Get(&n_clusters) ||
      !r.Get(&n_members) || n_super < 0 || n_clusters < 0 || n_members < 0 ||
      r.left() != static_cast<std::size_t>(n_super) * 40 + static_cast<std::size_t>(n_clusters) * 32 +
                       static_cast<std::size_t>(n_members) * 4)
    return Status::InvalidArgument("a corrupt list of clusters: its sizes");
  list.superclusters.resize(static_cast<std::size_t>(n_super));
  for (Supercluster& sc : list.superclusters)
    if (!GetCluster(&r, &sc.ball) || !r.Get(&sc.first_cluster) || !r.Get(&sc.n_clusters))
      return Status::InvalidArgument("a corrupt list of clusters: truncated");
  list.clusters.resize(static_cast<std::size_t>(n_clusters));
  for (Cluster& c : list.clusters)
    if (!GetCluster(&r, &c)) return Status::InvalidArgument("a corrupt list of clusters: truncated");
  list.members.resize(static_cast<std::size_t>(n_members));
  for (int32_t& m : list.members)
    if (!r.Get(&m)) return Status::InvalidArgument("a corrupt list of clusters: truncated");
  Status s = CheckClusterList(list);
  if (!s.ok()) return s;
  *out = std::move(list);
  return Status::Ok();
}

}  // namespace genie
