-- ranktune: one atomic edit of a Redis cache (see docs/cache.md, "Redis").
-- KEYS[1] meta hash, KEYS[2] envs hash, KEYS[3] sections set, KEYS[4] the
-- blocklist hash, KEYS[5..] one hash per section edited, in the order of
-- the ARGV groups.
-- ARGV: 1 format, 2 major version, 3 version, 4 lib_version, 5 host,
-- 6 now (unix seconds), 7 section key prefix, 8 number of environments,
-- then (digest, identity JSON) pairs, then the number of blocklist edits
-- and their (field, expected, new) triples, then per section: name, number
-- of edits, then (field, expected, new) triples. expected: '*' any value,
-- '' absent, else the exact stored text. new: '' deletes the field.
-- Every expectation is checked before anything is written: the edit is
-- applied whole or not at all. Returns {1, changed, total} or {0, conflicts, 0}.
local meta, envs, set = KEYS[1], KEYS[2], KEYS[3]
for k = 1, #KEYS do
  if k ~= 3 then
    local t = redis.call('TYPE', KEYS[k])['ok']
    if t ~= 'hash' and t ~= 'none' then
      return redis.error_reply('RANKTUNE_FOREIGN key ' .. KEYS[k] .. ' is a ' .. t .. ', not a hash')
    end
  end
end
local st = redis.call('TYPE', set)['ok']
if st ~= 'set' and st ~= 'none' then
  return redis.error_reply('RANKTUNE_FOREIGN key ' .. set .. ' is a ' .. st .. ', not a set')
end
local fmt = redis.call('HGET', meta, 'format')
if fmt and fmt ~= ARGV[1] then
  return redis.error_reply('RANKTUNE_FOREIGN ' .. meta .. ' says format ' .. fmt)
end
local ver = redis.call('HGET', meta, 'version')
if ver and string.match(ver, '^(%d+)%.') ~= ARGV[2] then
  return redis.error_reply('RANKTUNE_FOREIGN ' .. meta .. ' says version ' .. ver)
end
local nenv = tonumber(ARGV[8])
local bpos = 9 + 2 * nenv
local nblk = tonumber(ARGV[bpos])
local first = bpos + 1 + 3 * nblk
local conflicts = 0
local function conflicting(key, field, expected)
  if expected == '*' then
    return false
  end
  local cur = redis.call('HGET', key, field)
  return (expected == '' and cur) or (expected ~= '' and cur ~= expected)
end
for j = 0, nblk - 1 do
  local p = bpos + 1 + 3 * j
  if conflicting(KEYS[4], ARGV[p], ARGV[p + 1]) then
    conflicts = conflicts + 1
  end
end
local pos = first
for k = 5, #KEYS do
  local n = tonumber(ARGV[pos + 1])
  pos = pos + 2
  for _ = 1, n do
    if conflicting(KEYS[k], ARGV[pos], ARGV[pos + 1]) then
      conflicts = conflicts + 1
    end
    pos = pos + 3
  end
end
if conflicts > 0 then
  return {0, conflicts, 0}
end
local changed = 0
for j = 0, nenv - 1 do
  local d, v = ARGV[9 + 2 * j], ARGV[10 + 2 * j]
  if redis.call('HGET', envs, d) ~= v then
    redis.call('HSET', envs, d, v)
  end
end
for j = 0, nblk - 1 do
  local p = bpos + 1 + 3 * j
  local field, new = ARGV[p], ARGV[p + 2]
  if new == '' then
    changed = changed + redis.call('HDEL', KEYS[4], field)
  elseif redis.call('HGET', KEYS[4], field) ~= new then
    redis.call('HSET', KEYS[4], field, new)
    changed = changed + 1
  end
end
pos = first
for k = 5, #KEYS do
  local name, n = ARGV[pos], tonumber(ARGV[pos + 1])
  pos = pos + 2
  for _ = 1, n do
    local field, new = ARGV[pos], ARGV[pos + 2]
    if new == '' then
      changed = changed + redis.call('HDEL', KEYS[k], field)
    elseif redis.call('HGET', KEYS[k], field) ~= new then
      redis.call('HSET', KEYS[k], field, new)
      changed = changed + 1
    end
    pos = pos + 3
  end
  if redis.call('EXISTS', KEYS[k]) == 1 then
    redis.call('SADD', set, name)
  else
    redis.call('SREM', set, name)
  end
end
redis.call('HSETNX', meta, 'format', ARGV[1])
redis.call('HSETNX', meta, 'version', ARGV[3])
redis.call('HSETNX', meta, 'created_unix', ARGV[6])
if changed > 0 or redis.call('HEXISTS', meta, 'updated_unix') == 0 then
  redis.call('HSET', meta, 'lib_version', ARGV[4])
  redis.call('HSET', meta, 'host', ARGV[5])
  redis.call('HSET', meta, 'updated_unix', ARGV[6])
end
local total = 0
for _, name in ipairs(redis.call('SMEMBERS', set)) do
  local n = redis.pcall('HLEN', ARGV[7] .. name)
  if type(n) == 'number' then
    total = total + n
  end
end
return {1, changed, total}
