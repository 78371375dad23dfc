#include "core/GzipDeflater.hpp"

#include "core/Error.hpp"

namespace airlock {

GzipDeflater::GzipDeflater() {
    if (deflateInit2(&z_, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        throw Error(ErrorCode::internal, "zlib could not start");
}

GzipDeflater::~GzipDeflater() { deflateEnd(&z_); }

std::string GzipDeflater::run(std::string_view data, int flush) {
    if (finished_) throw Error(ErrorCode::internal, "gzip stream already finished");
    std::string out;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z_.avail_in = static_cast<uInt>(data.size());
    char buf[64 * 1024];
    for (;;) {
        z_.next_out = reinterpret_cast<Bytef*>(buf);
        z_.avail_out = sizeof buf;
        int rc = deflate(&z_, flush);
        if (rc == Z_STREAM_ERROR) throw Error(ErrorCode::internal, "zlib deflate failed");
        out.append(buf, sizeof buf - z_.avail_out);
        if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_out != 0) break;
    }
    if (flush == Z_FINISH) finished_ = true;
    return out;
}

std::string GzipDeflater::add(std::string_view data) {
    if (data.empty()) return {};
    return run(data, Z_SYNC_FLUSH);
}

std::string GzipDeflater::finish() { return run({}, Z_FINISH); }

}  // namespace airlock
