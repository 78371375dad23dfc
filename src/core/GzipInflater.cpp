#include "core/GzipInflater.hpp"

#include "core/Error.hpp"

namespace airlock {

GzipInflater::GzipInflater() {
    // 16 + MAX_WBITS: gzip's header and trailer, checked.
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK)
        throw Error(ErrorCode::internal, "zlib could not start");
}

GzipInflater::~GzipInflater() { inflateEnd(&z_); }

void GzipInflater::feed(std::string_view compressed) {
    if (pending()) throw Error(ErrorCode::internal, "gzip input fed before the last was taken");
    input_.assign(compressed);
    offset_ = 0;
}

std::string GzipInflater::next(std::size_t max) {
    std::string out(max, '\0');
    std::size_t produced = 0;
    while (pending() && produced < max) {
        z_.next_in = reinterpret_cast<Bytef*>(input_.data() + offset_);
        z_.avail_in = static_cast<uInt>(input_.size() - offset_);
        z_.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
        z_.avail_out = static_cast<uInt>(max - produced);
        inMember_ = true;
        int rc = inflate(&z_, Z_NO_FLUSH);
        offset_ = input_.size() - z_.avail_in;
        produced = max - z_.avail_out;
        if (rc == Z_STREAM_END) {
            inMember_ = false;
            // Another member may follow; anything else after it is not gzip.
            if (inflateReset(&z_) != Z_OK) throw Error(ErrorCode::internal, "zlib reset failed");
            continue;
        }
        if (rc == Z_BUF_ERROR) break;  // needs more input, or more room
        if (rc != Z_OK)
            throw Error(ErrorCode::bad_request,
                        std::string("the gzip body is malformed: ") + (z_.msg ? z_.msg : "zlib"));
    }
    out.resize(produced);
    return out;
}

void GzipInflater::finish() const {
    if (pending() || inMember_)
        throw Error(ErrorCode::bad_request, "the gzip body is cut short");
}

}  // namespace airlock
