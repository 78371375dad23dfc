#pragma once

namespace airlock {

class Database;

// The schema's steps, each run once in order and counted in PRAGMA
// user_version. A change to a table is a new step appended to the list in
// Schema.cpp; steps already released are never edited.
inline constexpr int kLatestSchemaVersion = 8;

// Runs the steps a file has not had, up to `version`. A file from before
// versioning (tables, user_version 0) gains the tables and columns step 1
// has and it lacks, keeping its rows. A file from a newer release is refused.
void bringSchemaUpTo(Database& db, int version);

}  // namespace airlock
