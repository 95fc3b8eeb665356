#pragma once
// prism::data: Ray Data for HPC. Link prism::data.
//   prism/data/block.h    Column, Schema, Block, Row/Value (columnar batches, Prism values)
//   prism/data/dataset.h  Dataset (lazy, streaming), sources (Range, FromItems, ReadHdf5,
//                         ReadNumpy, ReadCsv, ReadBinaryFiles), BatchIterator
//   prism/data/actor_class.h    ActorClass<C>: a callable class for MapBatches' actor pool
//   prism/data/map_options.h    MapOptions, MapBatchesOptions, Concurrency, RetryExceptions
//   prism/data/next_iterator.h  NextIterator: range-for over BatchIterator / TorchBatchIterator
// (prism/data/torch.h converts blocks to torch tensors; link prism::data_torch.)

#include "prism/data/actor_class.h"
#include "prism/data/block.h"
#include "prism/data/map_options.h"
#include "prism/data/dataset.h"
