#pragma once
// prism::data: Ray Data for HPC. Link prism::data.
//   prism/data/block.h    Column, Schema, Block, Row/Value (columnar batches, Prism values)
//   prism/data/dataset.h  Dataset (lazy, streaming), sources (Range, FromItems, ReadHdf5,
//                         ReadNumpy, ReadCsv, ReadBinaryFiles), BatchIterator
// (prism/data/torch.h converts blocks to torch tensors; link prism::data_torch.)

#include "prism/data/block.h"
#include "prism/data/dataset.h"
