-- ranktune: read a Redis cache's hashes in one round trip (see docs/cache.md).
-- KEYS: the hashes to read (meta, envs, then sections). ARGV[1]: the most
-- bytes one value may have (a longer one comes back as its length, an
-- integer, and is skipped by the reader); ARGV[2]: the most bytes in all.
-- A key that is not a hash comes back as its type name (a status reply).
local maxv, maxt = tonumber(ARGV[1]), tonumber(ARGV[2])
local total = 0
local out = {}
for k = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[k])['ok']
  if t == 'none' then
    out[k] = {}
  elseif t ~= 'hash' then
    out[k] = {ok = t}
  else
    local flat = redis.call('HGETALL', KEYS[k])
    for j = 2, #flat, 2 do
      local len = #flat[j]
      total = total + #flat[j - 1]
      if len > maxv then
        flat[j] = len
      else
        total = total + len
      end
    end
    if total > maxt then
      return redis.error_reply('RANKTUNE_TOO_BIG ' .. total)
    end
    out[k] = flat
  end
end
return out
